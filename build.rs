//! Compiles `proto/evaluator.proto` (Porch's function-runner protocol) with
//! protox, a pure-Rust protobuf compiler, so no `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/evaluator.proto");
    let descriptors = protox::compile(["evaluator.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
