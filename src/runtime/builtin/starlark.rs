//! `starlark` (kpt Go SDK, family K): runs a `StarlarkRun` (or ConfigMap)
//! program on the `starlark` crate with the catalog function's API
//! (`ctx.resource_list`, `ctx.environment`, `print` to stderr, `fail`), in a
//! sandbox: `load()` reaches only the libraries the function bundles that
//! krender provides (`krmfn.star`, `encoding/json.star`; see [`Libraries`]),
//! there are no file system or network builtins, and a step budget plus a
//! deadline make a runaway loop fail instead of hanging (spec
//! catalog-functions §4).
//!
//! Values cross the boundary as plain data: YAML nodes become dicts (in
//! document order), lists, strings, ints, floats, bools and None; the result
//! is re-encoded as go-yaml's `Marshal` would write the Go values the real
//! function builds (keys sorted, type-revealing quoting, §4.5).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::time::Instant;

use starlark::environment::{FrozenModule, Globals, GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::{Evaluator, FileLoader};
use starlark::syntax::{AstModule, Dialect, DialectTypes};
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::float::StarlarkFloat;
use starlark::values::list::{AllocList, ListRef};
use starlark::values::structs::AllocStruct;
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, UnpackValue, Value};

use crate::yaml::alias::AliasBudget;
use while_loops::Rewritten;

mod while_loops;
use starlark::{ErrorKind, PrintHandler};

use super::goyaml::{go_format_float, parse_go_float, parse_go_int, string_node};
use super::sdk::{FUNCTION_FAILURE, FnResult, Outcome, ResourceList, split_api_version};
use crate::yaml::node::{Node, NodeKind, tag};
use crate::yaml::resolve::resolve_plain;

/// Bounds on one program run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Function calls plus loop iterations the program may execute.
    pub(crate) max_ticks: u64,
    /// Wall-clock deadline.
    pub(crate) deadline: Option<Instant>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_ticks: 50_000_000,
            deadline: None,
        }
    }
}

const DEFAULT_NAME: &str = "starlark-function-run";

/// Runs the starlark function on a parsed input.
pub(crate) fn run(input: ResourceList, limits: Limits) -> Outcome {
    let program = match Program::from_function_config(input.function_config.as_ref()) {
        Ok(program) => program,
        Err(message) => return Outcome::sdk_failure(input, vec![FnResult::error(message)]),
    };
    let (result, printed) = execute_on_own_stack(&program, &input, limits);
    let printed = RefCell::new(printed);
    match result {
        Ok(items) => {
            let mut outcome = Outcome::sdk(input, Vec::new());
            outcome.items = items;
            // The step's stderr is the printed lines joined by newlines,
            // without a trailing one.
            let mut printed = printed.into_inner();
            if printed.ends_with('\n') {
                printed.pop();
            }
            outcome.stderr = printed;
            outcome
        }
        Err(message) => {
            let mut outcome = Outcome::sdk_failure(input, vec![FnResult::error(message)]);
            outcome.stderr = format!("{}{FUNCTION_FAILURE}", printed.into_inner());
            outcome
        }
    }
}

/// Stack for a program's evaluation: starlark's collector and the value
/// conversions recurse as deep as the values nest (up to [`MAX_DEPTH`],
/// where a 2 MiB worker stack is not enough). Only what is touched is
/// committed.
const STACK_BYTES: usize = 256 << 20;

/// [`execute`] on a thread of its own with [`STACK_BYTES`] of stack: the
/// result and what the program printed.
fn execute_on_own_stack(
    program: &Program,
    input: &ResourceList,
    limits: Limits,
) -> (Result<Vec<Node>, String>, String) {
    std::thread::scope(|scope| {
        let evaluation = std::thread::Builder::new()
            .name("krender-starlark".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                let printed = RefCell::new(String::new());
                let result = execute(program, input, limits, &printed);
                (result, printed.into_inner())
            });
        match evaluation {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| (Err("builtin starlark panicked".to_owned()), String::new())),
            Err(error) => (
                Err(format!("cannot start starlark: {error}")),
                String::new(),
            ),
        }
    })
}

/// The program to run: its name (used in error positions) and source.
struct Program {
    name: String,
    source: String,
}

impl Program {
    fn from_function_config(config: Option<&Node>) -> Result<Program, String> {
        let Some(config) = config else {
            return Err(
                "FunctionConfig is missing. Expect `ConfigMap` or `StarlarkRun`".to_owned(),
            );
        };
        let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = config.get_str(&["kind"]).unwrap_or_default();
        let (group, version) = split_api_version(api_version);
        let source = if group == "fn.kpt.dev" && kind == "StarlarkRun" {
            config.get_str(&["source"])
        } else if group.is_empty() && kind == "ConfigMap" {
            config.get_str(&["data", "source"])
        } else {
            return Err(format!(
                "`functionConfig` must be either /v1, Kind=ConfigMap or fn.kpt.dev/v1alpha1, Kind=StarlarkRun, but we got: {group}/{version}, Kind={kind}"
            ));
        };
        let source = source.unwrap_or_default();
        if source.is_empty() {
            return Err("`source` must not be empty".to_owned());
        }
        let name = config
            .get_str(&["metadata", "name"])
            .filter(|name| !name.is_empty())
            .unwrap_or(DEFAULT_NAME);
        Ok(Program {
            name: name.to_owned(),
            source: source.to_owned(),
        })
    }
}

/// Collects `print` output; the function writes it to stderr.
struct Printer<'a>(&'a RefCell<String>);

impl PrintHandler for Printer<'_> {
    fn println(&self, text: &str) -> starlark::Result<()> {
        let mut out = self.0.borrow_mut();
        out.push_str(text);
        out.push('\n');
        Ok(())
    }
}

/// The dialect of go.starlark.net as the catalog function configures it.
/// (`while` loops, which no `Dialect` offers, are rewritten by
/// [`while_loops`]; type annotations are not Starlark in Go.)
fn dialect() -> Dialect {
    Dialect {
        enable_top_level_stmt: true,
        enable_keyword_only_arguments: true,
        enable_load: true,
        enable_types: DialectTypes::Disable,
        ..Dialect::Extended
    }
}

/// Heap a program may use beyond four times its input's size.
const HEAP_ALLOWANCE: usize = 512 << 20;

/// The module global that keeps `ctx.resource_list` reachable for the
/// collector (a name no program uses).
const RESOURCE_LIST_SLOT: &str = "_krender_resource_list";

fn execute(
    program: &Program,
    input: &ResourceList,
    limits: Limits,
    printed: &RefCell<String>,
) -> Result<Vec<Node>, String> {
    let rewritten = while_loops::rewrite(&program.source);
    let describe = |err: &starlark::Error| describe_error(&program.name, err, Some(&rewritten));
    let ast = AstModule::parse(&program.name, rewritten.source.clone(), &dialect())
        .map_err(|err| describe(&err))?;
    // go.starlark.net's universe, `set` included (`resolve.AllowSet`): a
    // program that calls `struct`, `map`, `filter` or an unloaded `json`
    // fails to compile there, and so here.
    let globals =
        GlobalsBuilder::extended_by(&[LibraryExtension::Print, LibraryExtension::SetType]).build();
    // What the bundled libraries are built with.
    let library_globals = GlobalsBuilder::extended_by(&[
        LibraryExtension::StructType,
        LibraryExtension::SetType,
        LibraryExtension::Json,
    ])
    .build();
    Module::with_temp_heap(|module| {
        let heap = module.heap();
        let mut to_value = ToValue::new(heap);
        let items: Vec<Value> = input
            .items
            .iter()
            .map(|item| to_value.convert(item))
            .collect::<Result<_, _>>()?;
        let config = match &input.function_config {
            Some(config) => to_value.convert(config)?,
            None => heap.alloc(AllocDict(Vec::<(Value, Value)>::new())),
        };
        let resource_list = heap.alloc(AllocDict([
            (
                heap.alloc_str("apiVersion").to_value(),
                heap.alloc_str("config.kubernetes.io/v1").to_value(),
            ),
            (
                heap.alloc_str("kind").to_value(),
                heap.alloc_str("ResourceList").to_value(),
            ),
            (
                heap.alloc_str("items").to_value(),
                heap.alloc(AllocList(items)),
            ),
            (heap.alloc_str("functionConfig").to_value(), config),
        ]));
        let environment = heap.alloc(AllocDict(Vec::<(Value, Value)>::new()));
        // kyaml's document is large: it is converted for programs that name
        // it (`getattr(ctx, "open_" + "api")` finds no attribute).
        let open_api = if program.source.contains("open_api") {
            let document = super::openapi::bundled()?.document();
            Some(json_to_value(document, heap))
        } else {
            None
        };
        let mut fields = vec![
            ("resource_list", resource_list),
            ("environment", environment),
        ];
        fields.extend(open_api.map(|open_api| ("open_api", open_api)));
        let ctx = heap.alloc(AllocStruct(fields));
        module.set("ctx", ctx);
        // Values held only in Rust locals are not roots: a garbage
        // collection during the program moves them and leaves the local
        // dangling (that segfaulted on any list of ~60 resources or more).
        // The module's slots are roots, so the list is read back from one.
        module.set(RESOURCE_LIST_SLOT, resource_list);

        let printer = Printer(printed);
        let libraries = Libraries {
            globals: &library_globals,
        };
        let mut eval = Evaluator::new(&module);
        eval.set_loader(&libraries);
        eval.set_print_handler(&printer);
        eval.set_max_tick_count(limits.max_ticks.max(1))
            .map_err(|err| err.to_string())?;
        // The heap may grow to a few times what the input took, plus an
        // allowance. starlark checks it (like the deadline) every thousand
        // steps: a long loop growing memory stops with an error instead of
        // an out-of-memory abort.
        let heap_limit = heap
            .allocated_bytes()
            .saturating_mul(4)
            .saturating_add(HEAP_ALLOWANCE);
        eval.set_max_heap_size(heap_limit)
            .map_err(|err| err.to_string())?;
        if let Some(deadline) = limits.deadline {
            eval.set_check_cancelled(Box::new(move || Instant::now() >= deadline));
        }
        // The endless range the rewritten `while` loops iterate.
        if let Some((_, range)) = globals.iter().find(|(name, _)| *name == "range") {
            let forever = eval
                .eval_function(range.to_value(), &[heap.alloc(i32::MAX)], &[])
                .map_err(|err| describe(&err))?;
            module.set(while_loops::FOREVER, forever);
        }
        eval.eval_module(ast, &globals)
            .map_err(|err| describe(&err))?;
        drop(eval);

        let resource_list = module
            .get(RESOURCE_LIST_SLOT)
            .ok_or_else(|| "missing resource_list".to_owned())?;
        let items = DictRef::from_value(resource_list)
            .and_then(|dict| dict.get_str("items"))
            .ok_or_else(|| "missing items in resource_list".to_owned())?;
        let items = ListRef::from_value(items)
            .map(|list| list.content().to_vec())
            .or_else(|| TupleRef::from_value(items).map(|tuple| tuple.content().to_vec()))
            .ok_or_else(|| format!("items must be a list, got {}", items.get_type()))?;
        items
            .into_iter()
            .map(|item| value_to_node(item, 0))
            .collect()
    })
}

/// The catalog's `krmfn.star`: the function's own helpers, which take a
/// resource and compare its kind, name or namespace as the kpt SDK's
/// `KubeObject` does (`IsGVK`: an empty group, version or kind asked for
/// matches any; `v1` asks for the core group or any other).
const KRMFN_SOURCE: &str = r#"
def _group_version(api_version):
    if api_version == "" or api_version == "/":
        return ("", "")
    parts = api_version.split("/")
    if len(parts) == 1:
        return ("", api_version)
    if len(parts) == 2:
        return (parts[0], parts[1])
    fail("unexpected GroupVersion string: " + api_version)

def _text(resource, *path):
    value = resource
    for key in path:
        if type(value) != "dict":
            return ""
        value = value.get(key)
    if type(value) != "string":
        return ""
    return value

def _match_gvk(resource, api_version, kind):
    group, version = _group_version(api_version)
    own = _text(resource, "apiVersion")
    own_group, own_version = ("", own)
    if "/" in own:
        own_group, own_version = own.split("/", 1)
    if kind != "" and _text(resource, "kind") != kind:
        return False
    if group != "" and own_group != group:
        return False
    if version != "" and own_version != version:
        return False
    return True

def _match_name(resource, name):
    return _text(resource, "metadata", "name") == name

def _match_namespace(resource, namespace):
    return _text(resource, "metadata", "namespace") == namespace

krmfn = struct(
    match_gvk = _match_gvk,
    match_name = _match_name,
    match_namespace = _match_namespace,
)
"#;

/// What a program may `load()`: the libraries the catalog's starlark
/// function bundles that krender provides. Any other module (the function
/// also bundles qri-io's starlib: `math.star`, `time.star`, `re.star`, …)
/// fails the load with an error naming it, so the user knows to run the
/// real function.
struct Libraries<'a> {
    globals: &'a Globals,
}

impl FileLoader for Libraries<'_> {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        Module::with_temp_heap(|module| self.build(path, module))
    }
}

impl Libraries<'_> {
    fn build(&self, path: &str, module: Module<'_>) -> starlark::Result<FrozenModule> {
        let error = |message: String| starlark::Error::new_other(std::io::Error::other(message));
        match path {
            "krmfn.star" => {
                let ast = AstModule::parse(path, KRMFN_SOURCE.to_owned(), &dialect())?;
                let mut eval = Evaluator::new(&module);
                eval.eval_module(ast, self.globals)?;
            }
            // go.starlark.net's json module, which the function exposes
            // under this name: the same `json` the programs see as a global.
            "encoding/json.star" => {
                let json = self
                    .globals
                    .iter()
                    .find(|(name, _)| *name == "json")
                    .map(|(_, value)| value);
                if let Some(json) = json {
                    module.frozen_heap().add_reference(self.globals.heap());
                    module.set("json", json.to_value());
                }
            }
            other => {
                return Err(error(format!(
                    "cannot load {other}: krender's builtin starlark provides krmfn.star and \
                     encoding/json.star; run the catalog's starlark image for other modules"
                )));
            }
        }
        module.freeze().map_err(|frozen| error(frozen.err_msg))
    }
}

/// go.starlark.net's wording for an error, with `name:L:C:` positions for
/// compile-time errors (in the program as written, before its `while`
/// loops were rewritten).
fn describe_error(name: &str, err: &starlark::Error, rewritten: Option<&Rewritten>) -> String {
    let bare = err.without_diagnostic().to_string();
    let position = err.span().map(|span| {
        let in_program = rewritten.filter(|rewritten| span.file.source() == rewritten.source);
        let (line, column) = match in_program {
            Some(rewritten) => {
                let original = rewritten.original();
                let offset = rewritten
                    .original_offset(span.span.begin().get() as usize)
                    .min(original.len());
                let before = original.get(..offset).unwrap_or_default();
                let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                (
                    before.matches('\n').count(),
                    before[line_start..].chars().count(),
                )
            }
            None => {
                let resolved = span.resolve_span();
                (resolved.begin.line, resolved.begin.column)
            }
        };
        format!("{name}:{}:{}", line + 1, column + 1)
    });
    match err.kind() {
        ErrorKind::Fail(_) => bare,
        ErrorKind::Parser(_) => {
            let message = go_parse_message(&bare);
            match position {
                Some(position) => format!("{position}: {message}"),
                None => message,
            }
        }
        ErrorKind::Scope(_) => {
            let message = go_scope_message(&bare);
            match position {
                Some(position) => format!("{position}: {message}"),
                None => message,
            }
        }
        _ => go_runtime_message(&bare),
    }
}

/// Rewords a starlark-rust parse error as go.starlark.net does
/// (`got <token>, want <what>`), where the correspondence is known.
fn go_parse_message(message: &str) -> String {
    let message = message.trim_start_matches("Parse error: ");
    let Some(rest) = message.strip_prefix("unexpected ") else {
        return message.to_owned();
    };
    let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
    let found = found.trim_end_matches(" here");
    let got = match found {
        "new line" => "newline".to_owned(),
        "end of file" | "EOF" => "end of file".to_owned(),
        "indentation" => "indent".to_owned(),
        "dedentation" | "dedent" => "outdent".to_owned(),
        other => {
            let token = other.trim_matches('\'').trim_matches('"');
            if token.starts_with(|c: char| c.is_ascii_digit()) {
                "int literal".to_owned()
            } else if token.chars().all(|c| c.is_alphanumeric() || c == '_') && !is_keyword(token) {
                "identifier".to_owned()
            } else {
                format!("'{token}'")
            }
        }
    };
    let want = match expected {
        "expression" | "" => "primary expression",
        other => other,
    };
    format!("got {got}, want {want}")
}

fn is_keyword(token: &str) -> bool {
    matches!(
        token,
        "and"
            | "break"
            | "continue"
            | "def"
            | "elif"
            | "else"
            | "for"
            | "if"
            | "in"
            | "lambda"
            | "load"
            | "not"
            | "or"
            | "pass"
            | "return"
            | "while"
    )
}

/// `Variable `x` not found` → `undefined: x`.
fn go_scope_message(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("Variable `")
        && let Some((name, _)) = rest.split_once("` not found")
    {
        return format!("undefined: {name}");
    }
    message.to_owned()
}

/// Rewords the common runtime errors into go.starlark.net's text.
fn go_runtime_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message).trim();
    if let Some(rest) = first.strip_prefix("Key `")
        && let Some(key) = rest.strip_suffix("` was not found")
    {
        return format!("key {key} not in dict");
    }
    if let Some(rest) = first.strip_prefix("Local variable `")
        && let Some(name) = rest.strip_suffix("` referenced before assignment")
    {
        return format!("local variable {name} referenced before assignment");
    }
    if let Some(rest) = first.strip_prefix("Operation `") {
        let parts: Vec<&str> = rest.split('`').collect();
        match parts.as_slice() {
            [op, " not supported for types ", left, " and ", right, ""] => {
                return format!("unknown binary op: {left} {op} {right}");
            }
            ["len()", " not supported on type ", typ, ""] => {
                return format!("len: value of type {typ} has no len");
            }
            ["call()", " not supported on type ", typ, ""] => {
                return format!("invalid call of non-function ({typ})");
            }
            [op @ ("-" | "+" | "~"), " not supported on type ", typ, ""] => {
                return format!("unknown unary op: {op} {typ}");
            }
            _ => {}
        }
    }
    if let Some(rest) = first.strip_prefix("Object of type `") {
        let parts: Vec<&str> = rest.split('`').collect();
        if let [typ, " has no attribute ", name, ..] = parts.as_slice() {
            return go_attribute_error(typ, name);
        }
    }
    if let Some(rest) = first.strip_prefix("Value of type `")
        && let Some(typ) = rest.strip_suffix("` is not hashable")
    {
        return format!("unhashable type: {typ}");
    }
    if first.starts_with("Floor division by zero: ") {
        return "floored division by zero".to_owned();
    }
    if first.starts_with("float division by zero: ") {
        return "floating-point division by zero".to_owned();
    }
    if first.starts_with("Modulo by zero: ") {
        return "integer modulo by zero".to_owned();
    }
    if first == "Not enough arguments for format string" {
        return "not enough arguments for format string".to_owned();
    }
    first.to_owned()
}

/// go.starlark.net's `getAttr` error: `<type> has no .<name> field or
/// method` (for a struct, starlarkstruct's `struct has no .<name>
/// attribute`), with the spelling hint Go adds for values that have
/// attributes.
fn go_attribute_error(typ: &str, name: &str) -> String {
    // The sorted `AttrNames` of the Go values a program meets.
    let candidates: &[&str] = match typ {
        "string" => &[
            "capitalize",
            "codepoint_ords",
            "codepoints",
            "count",
            "elem_ords",
            "elems",
            "endswith",
            "find",
            "format",
            "index",
            "isalnum",
            "isalpha",
            "isdigit",
            "islower",
            "isspace",
            "istitle",
            "isupper",
            "join",
            "lower",
            "lstrip",
            "partition",
            "removeprefix",
            "removesuffix",
            "replace",
            "rfind",
            "rindex",
            "rpartition",
            "rsplit",
            "rstrip",
            "split",
            "splitlines",
            "startswith",
            "strip",
            "title",
            "upper",
        ],
        "list" => &[
            "append", "clear", "extend", "index", "insert", "pop", "remove",
        ],
        "dict" => &[
            "clear",
            "get",
            "items",
            "keys",
            "pop",
            "popitem",
            "setdefault",
            "update",
            "values",
        ],
        "set" => &[
            "add",
            "clear",
            "difference",
            "discard",
            "intersection",
            "issubset",
            "issuperset",
            "pop",
            "remove",
            "symmetric_difference",
            "union",
        ],
        // `ctx`, the only struct a program sees.
        "struct" => &["environment", "open_api", "resource_list"],
        _ => return format!("{typ} has no .{name} field or method"),
    };
    let message = if typ == "struct" {
        format!("struct has no .{name} attribute")
    } else {
        format!("{typ} has no .{name} field or method")
    };
    match nearest(name, candidates) {
        Some(hint) => format!("{message} (did you mean .{hint}?)"),
        None => message,
    }
}

/// go.starlark.net's `spell.Nearest`: the first candidate within fewer
/// edits than half the name's length, underscores and case ignored.
fn nearest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let fold = |text: &str| -> String {
        text.chars()
            .filter(|&c| c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let name = fold(name);
    let mut best = None;
    let mut best_distance = name.len().div_ceil(2);
    for &candidate in candidates {
        let distance = strsim::levenshtein(&name, &fold(candidate));
        if distance < best_distance {
            best_distance = distance;
            best = Some(candidate);
        }
    }
    best
}

/// How deep a value may nest on its way between nodes and starlark values:
/// deeper than any real resource, shallow enough for a worker's stack. A
/// starlark list that contains itself reaches it too.
const MAX_DEPTH: usize = 1_000;

/// Converts nodes to starlark values on one heap: mappings keep document
/// order, scalars follow their resolved tag, aliases are expanded, under
/// go-yaml v3's limit on aliasing (a few bytes of aliases must not expand
/// into gigabytes) and [`MAX_DEPTH`].
struct ToValue<'v> {
    heap: Heap<'v>,
    anchors: HashMap<String, Node>,
    aliases: AliasBudget,
}

impl<'v> ToValue<'v> {
    fn new(heap: Heap<'v>) -> ToValue<'v> {
        ToValue {
            heap,
            anchors: HashMap::new(),
            aliases: AliasBudget::default(),
        }
    }

    fn convert(&mut self, node: &Node) -> Result<Value<'v>, String> {
        self.value(node, 0, false)
    }

    fn value(&mut self, node: &Node, depth: usize, via_alias: bool) -> Result<Value<'v>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("resource nested deeper than {MAX_DEPTH} levels"));
        }
        self.aliases.count(1, via_alias)?;
        if !node.anchor().is_empty() {
            self.anchors.insert(node.anchor().to_string(), node.clone());
        }
        let heap = self.heap;
        Ok(match node.kind {
            NodeKind::Document => match node.content.first() {
                Some(root) => self.value(root, depth + 1, via_alias)?,
                None => Value::new_none(),
            },
            NodeKind::Mapping => {
                let mut entries = Vec::with_capacity(node.content.len() / 2);
                for (key, value) in node.pairs() {
                    let key = self.value(key, depth + 1, via_alias)?;
                    // A mapping or list as a key has no dict form (starlark
                    // would panic building the dict).
                    if key.get_hashed().is_err() {
                        return Err(format!(
                            "resource has a {} as a mapping key",
                            key.get_type()
                        ));
                    }
                    let value = self.value(value, depth + 1, via_alias)?;
                    entries.push((key, value));
                }
                heap.alloc(AllocDict(entries))
            }
            NodeKind::Sequence => {
                let mut items = Vec::with_capacity(node.content.len());
                for item in &node.content {
                    items.push(self.value(item, depth + 1, via_alias)?);
                }
                heap.alloc(AllocList(items))
            }
            NodeKind::Alias => match self.anchors.get(node.value.as_str()).cloned() {
                Some(target) => self.value(&target, depth + 1, true)?,
                None => Value::new_none(),
            },
            NodeKind::Scalar => scalar_to_value(node, heap),
        })
    }
}

/// A JSON document as Starlark values, as kyaml hands `ctx.open_api` over
/// (JSON, then YAML, then starlib's `util.Marshal`): objects are dicts
/// (kyaml's key order is a Go map's, so random; here it is sorted), whole
/// numbers ints.
fn json_to_value<'v>(value: &serde_json::Value, heap: Heap<'v>) -> Value<'v> {
    use serde_json::Value as Json;
    match value {
        Json::Null => Value::new_none(),
        Json::Bool(flag) => Value::new_bool(*flag),
        Json::Number(number) => match number.as_i64() {
            Some(int) => heap.alloc(int),
            None => heap.alloc(number.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(text) => heap.alloc_str(text).to_value(),
        Json::Array(items) => heap.alloc(AllocList(
            items
                .iter()
                .map(|item| json_to_value(item, heap))
                .collect::<Vec<_>>(),
        )),
        Json::Object(fields) => {
            let mut entries: Vec<(&String, &Json)> = fields.iter().collect();
            entries.sort_by(|left, right| left.0.cmp(right.0));
            heap.alloc(AllocDict(
                entries
                    .into_iter()
                    .map(|(key, value)| {
                        (heap.alloc_str(key).to_value(), json_to_value(value, heap))
                    })
                    .collect::<Vec<_>>(),
            ))
        }
    }
}

fn scalar_to_value<'v>(node: &Node, heap: Heap<'v>) -> Value<'v> {
    let effective_tag = if node.tag().is_empty() {
        if node.style.is_empty() {
            resolve_plain(&node.value)
        } else {
            tag::STR
        }
    } else {
        node.tag()
    };
    let text = node.value.as_str();
    match effective_tag {
        tag::NULL => Value::new_none(),
        tag::BOOL => Value::new_bool(matches!(text, "true" | "True" | "TRUE")),
        tag::INT => match parse_go_int(text) {
            Some(int) => heap.alloc(int),
            None => heap.alloc_str(text).to_value(),
        },
        tag::FLOAT => match parse_go_float(text) {
            Some(float) => heap.alloc(float),
            None => heap.alloc_str(text).to_value(),
        },
        _ => heap.alloc_str(text).to_value(),
    }
}

/// Converts a starlark value back to a node as go-yaml `Marshal` writes the
/// Go value the real function builds from it.
fn value_to_node(value: Value<'_>, depth: usize) -> Result<Node, String> {
    const TOO_DEEP: &str = "starlark value nested deeper than";
    if depth > MAX_DEPTH {
        return Err(format!(
            "{TOO_DEEP} {MAX_DEPTH} levels (or containing itself)"
        ));
    }
    // Said once, not once per level of a too deep value.
    let nested = |err: String| {
        if err.starts_with(TOO_DEEP) {
            err
        } else {
            format!("unmarshaling starlark value: {err}")
        }
    };
    if value.is_none() {
        return Ok(Node::new_scalar(tag::NULL, "null"));
    }
    if let Some(boolean) = value.unpack_bool() {
        return Ok(Node::new_scalar(
            tag::BOOL,
            if boolean { "true" } else { "false" },
        ));
    }
    if let Some(text) = value.unpack_str() {
        return Ok(string_node(text));
    }
    match value.get_type() {
        "int" => {
            return i64::unpack_value(value)
                .ok()
                .flatten()
                .map(|int| Node::new_scalar(tag::INT, int.to_string()))
                .ok_or_else(|| format!("integer {value} out of range"));
        }
        "float" => {
            let float = StarlarkFloat::unpack_value(value)
                .ok()
                .flatten()
                .map_or(f64::NAN, |float| float.0);
            return Ok(Node::new_scalar(tag::FLOAT, go_format_float(float)));
        }
        "set" => return Err(nested("sets aren't yet supported".to_owned())),
        _ => {}
    }
    if let Some(dict) = DictRef::from_value(value) {
        let mut entries = Vec::with_capacity(dict.len());
        for (key, item) in dict.iter() {
            let key_node = value_to_node(key, depth + 1).map_err(nested)?;
            let item_node = value_to_node(item, depth + 1).map_err(nested)?;
            entries.push((key_node, item_node));
        }
        entries.sort_by(|(a, _), (b, _)| go_key_order(a, b));
        let mut mapping = Node::new_mapping();
        for (key, item) in entries {
            mapping.content.push(key);
            mapping.content.push(item);
        }
        return Ok(mapping);
    }
    let elements = ListRef::from_value(value)
        .map(|list| list.content().to_vec())
        .or_else(|| TupleRef::from_value(value).map(|tuple| tuple.content().to_vec()));
    if let Some(elements) = elements {
        let mut sequence = Node::new_sequence();
        for element in elements {
            sequence
                .content
                .push(value_to_node(element, depth + 1).map_err(nested)?);
        }
        return Ok(sequence);
    }
    Err(format!("unrecognized starlark type: {}", value.get_type()))
}

/// go-yaml v3's map key order (`keyList.Less`): numbers before strings,
/// strings compared with runs of digits read as numbers.
fn go_key_order(a: &Node, b: &Node) -> Ordering {
    let rank = |node: &Node| match node.tag() {
        tag::BOOL => 1,
        tag::INT | tag::FLOAT => 2,
        tag::STR => 3,
        _ => 0,
    };
    let (rank_a, rank_b) = (rank(a), rank(b));
    if rank_a != rank_b || rank_a != 3 {
        if rank_a == 2 && rank_b == 2 {
            let x: f64 = a.value.parse().unwrap_or(0.0);
            let y: f64 = b.value.parse().unwrap_or(0.0);
            return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
        }
        return rank_a.cmp(&rank_b).then_with(|| a.value.cmp(&b.value));
    }
    natural_less(&a.value, &b.value)
}

fn natural_less(a: &str, b: &str) -> Ordering {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut digits = false;
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            digits = ar[i].is_ascii_digit();
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            let a_first = if digits { al } else { bl };
            return if a_first {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let mut an: i64 = 0;
        let mut bn: i64 = 0;
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .saturating_mul(10)
                .saturating_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .saturating_mul(10)
                .saturating_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_naturally() {
        let mut keys = vec!["b", "a10", "a9", "image", "name", "ports"];
        keys.sort_by(|a, b| natural_less(a, b));
        assert_eq!(keys, ["a9", "a10", "b", "image", "name", "ports"]);
    }

    #[test]
    fn parse_errors_are_reworded() {
        assert_eq!(
            go_parse_message("Parse error: unexpected new line, expected expression"),
            "got newline, want primary expression"
        );
        assert_eq!(go_scope_message("Variable `x` not found"), "undefined: x");
    }
}

#[cfg(test)]
mod engine_tests {
    use super::*;
    use crate::yaml::node::Style;

    fn run_source(source: &str, limits: Limits) -> (Result<Vec<Node>, String>, String) {
        let program = Program {
            name: "httpbin-gen".to_owned(),
            source: source.to_owned(),
        };
        let input = ResourceList {
            items: vec![Node::new_mapping()],
            function_config: None,
        };
        let printed = RefCell::new(String::new());
        let result = execute(&program, &input, limits, &printed);
        (result, printed.into_inner())
    }

    /// `ctx.open_api` is kyaml's document: a program can read a field's
    /// type from it.
    #[test]
    fn open_api_is_kyamls_definitions() {
        let source = "spec = ctx.open_api[\"definitions\"][\"io.k8s.api.apps.v1.DeploymentSpec\"]\nfor r in ctx.resource_list[\"items\"]:\n  r[\"replicasType\"] = spec[\"properties\"][\"replicas\"][\"type\"]\n  r[\"count\"] = len(ctx.open_api[\"definitions\"]) > 600\n";
        let (result, _) = run_source(source, Limits::default());
        let items = result.unwrap();
        assert_eq!(items[0].get_str(&["replicasType"]), Some("integer"));
        assert_eq!(items[0].get_str(&["count"]), Some("true"));
    }

    fn error_of(source: &str) -> String {
        match run_source(source, Limits::default()).0 {
            Err(message) => message,
            Ok(_) => "succeeded".to_owned(),
        }
    }

    #[test]
    fn syntax_errors_use_go_wording_and_positions() {
        let source = "# AND conditional has syntax error forcing fn to fail\ndef isHTTPBin(r):\n  return r[\"apiVersion\"] == \"apps/v1\" and r[\"kind\"] == \"Deployment\" and \n  r[\"metadata\"][\"name\"] == \"httpbin\"\n";
        assert_eq!(
            error_of(source),
            "httpbin-gen:3:73: got newline, want primary expression"
        );
    }

    /// What go.starlark.net allows under the options the catalog function
    /// sets (`resolve.AllowSet`, `AllowGlobalReassign`, `AllowRecursion`;
    /// kptdev/krm-functions-catalog functions/go/starlark/third_party/.../
    /// starlark.go): `while` loops, top-level `if`/`for` and reassignment,
    /// recursion, `set()`, and `%` formatting.
    #[test]
    fn the_catalog_functions_non_standard_features_run() {
        let source = r#"
def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)

def countdown(n):
    out = []
    while n > 0:
        out.append(n)
        n -= 1
    return out

i = 0
while i < 5:
    i += 1
    if i == 2:
        continue
    if i == 4:
        break
total = 0
for x in [1, 2, 3]:
    total += x
if total == 6:
    total = "six"
s = set(["foo", "bar"])
print(s)
print(len(s))
print("%s-%d-%r-%x" % ("a", 7, "q", 255))
checks = [fact(5) == 120, countdown(3) == [3, 2, 1], i == 4, total == "six"]
if not all(checks):
    fail("checks: %s" % checks)
"#;
        let (result, printed) = run_source(source, Limits::default());
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(printed, "set([\"foo\", \"bar\"])\n2\na-7-\"q\"-ff\n");
    }

    #[test]
    fn endless_while_loops_stop_at_the_step_budget() {
        let limits = Limits {
            max_ticks: 10_000,
            deadline: None,
        };
        assert!(run_source("while True:\n    pass\n", limits).0.is_err());
    }

    /// Positions are those of the program as written, not as rewritten.
    #[test]
    fn errors_near_while_loops_point_at_the_written_text() {
        assert_eq!(
            error_of("i = 0\nwhile i < 1:\n    i += 1\nx = y\n"),
            "httpbin-gen:4:5: undefined: y"
        );
        assert_eq!(
            error_of("while k < 1: j = 1\n"),
            "httpbin-gen:1:7: undefined: k"
        );
        assert_eq!(
            error_of("def f():\n    while j < 1:\n        j = 1\nf()\n"),
            "local variable j referenced before assignment"
        );
    }

    /// go.starlark.net's texts for the common runtime errors.
    #[test]
    fn runtime_errors_use_go_wording() {
        for (source, expected) in [
            ("1 // 0\n", "floored division by zero"),
            ("1 / 0\n", "floating-point division by zero"),
            ("1 % 0\n", "integer modulo by zero"),
            ("None.x\n", "NoneType has no .x field or method"),
            ("len(1)\n", "len: value of type int has no len"),
            ("x = 1\nx()\n", "invalid call of non-function (int)"),
            ("-'a'\n", "unknown unary op: - string"),
            ("d = {[1]: 2}\n", "unhashable type: list"),
            ("'%s %s' % (1,)\n", "not enough arguments for format string"),
            (
                "x = []\nx.apend(1)\n",
                "list has no .apend field or method (did you mean .append?)",
            ),
            (
                "'a'.strp()\n",
                "string has no .strp field or method (did you mean .strip?)",
            ),
            (
                "{}.nothing_like_it\n",
                "dict has no .nothing_like_it field or method",
            ),
            (
                "ctx.resource_lists\n",
                "struct has no .resource_lists attribute (did you mean .resource_list?)",
            ),
        ] {
            assert_eq!(error_of(source), expected, "{source:?}");
        }
    }

    /// Type annotations are not go.starlark.net syntax.
    #[test]
    fn type_annotations_are_syntax_errors() {
        // (Go's text is `got ':', want ')'`; the rejection is what matters.)
        assert_ne!(error_of("def f(x: int):\n    return x\n"), "succeeded");
        assert_eq!(error_of("def f(x):\n    return x\nf(1)\n"), "succeeded");
    }

    /// Only go.starlark.net's universe is predeclared: no `struct`, `map`,
    /// `filter` or unloaded `json`.
    #[test]
    fn builtins_go_does_not_predeclare_are_undefined() {
        for name in ["struct", "map", "filter", "json"] {
            assert_eq!(
                error_of(&format!("x = {name}\n")),
                format!("httpbin-gen:1:5: undefined: {name}")
            );
        }
    }

    #[test]
    fn fail_and_runtime_errors() {
        assert_eq!(error_of("fail('intentional', 1)\n"), "fail: intentional 1");
        assert_eq!(error_of("x = y\n"), "httpbin-gen:1:5: undefined: y");
        assert_eq!(error_of("d = {}\nd['x']\n"), "key \"x\" not in dict");
        assert_eq!(error_of("1 + 'a'\n"), "unknown binary op: int + string");
    }

    /// `krmfn.star` compares as the SDK's `KubeObject` does, and
    /// `encoding/json.star` is go.starlark.net's json module.
    #[test]
    fn programs_load_krmfn_and_json_as_the_catalog_function_bundles_them() {
        let source = r#"
load("krmfn.star", "krmfn")
load("encoding/json.star", "json")
cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}
dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
checks = [
    krmfn.match_gvk(cm, "v1", "ConfigMap"),
    krmfn.match_gvk(dep, "v1", "Deployment"),
    not krmfn.match_gvk(dep, "apps/v2", "Deployment"),
    not krmfn.match_gvk(cm, "v1", "Secret"),
    krmfn.match_gvk(dep, "", ""),
    krmfn.match_name(cm, "a"),
    not krmfn.match_name(dep, "a"),
    krmfn.match_namespace(cm, "ns"),
    krmfn.match_namespace(dep, ""),
    json.decode(json.encode({"k": [1, 2]})) == {"k": [1, 2]},
]
if not all(checks):
    fail("checks: %s" % checks)
"#;
        assert_eq!(error_of(source), "succeeded");
        assert!(
            error_of("load('krmfn.star', 'krmfn')\nkrmfn.match_gvk({}, 'a/b/c', 'K')\n")
                .contains("unexpected GroupVersion string: a/b/c")
        );
    }

    /// Odd uses of the libraries are errors, never a crash.
    #[test]
    fn odd_library_calls_fail_cleanly() {
        for source in [
            "load('krmfn.star', 'krmfn')\nkrmfn.match_gvk(1, 2, 3)\n",
            "load('krmfn.star', 'krmfn')\nkrmfn.match_name()\n",
            "load('krmfn.star', 'krmfn')\nload('krmfn.star', 'krmfn')\nkrmfn.match_name(None, 'a')\n",
            "load('encoding/json.star', 'json')\njson.decode('{')\n",
            "load('', '')\n",
            "load('krmfn.star', '_match_gvk')\n",
        ] {
            let _ = error_of(source);
        }
        assert_eq!(
            error_of("load('krmfn.star', 'krmfn')\nx = krmfn.match_name([], 'a')\n"),
            "succeeded"
        );
    }

    #[test]
    fn sandbox_loads_only_the_bundled_libraries_and_has_no_file_system() {
        assert!(error_of("load('os.star', 'os')\n").contains("cannot load os.star"));
        assert!(error_of("load('krmfn.star', 'x')\n").contains("x"));
        assert_eq!(
            error_of("open('/etc/passwd')\n"),
            "httpbin-gen:1:1: undefined: open"
        );
    }

    #[test]
    fn runaway_loops_stop_at_the_step_budget() {
        let limits = Limits {
            max_ticks: 10_000,
            deadline: None,
        };
        let (result, _) = run_source("for i in range(1000000000):\n  pass\n", limits);
        assert_eq!(
            result.err().as_deref(),
            Some("Execution duration limit of 10000 ticks has been exceeded")
        );
        let limits = Limits {
            max_ticks: u64::MAX,
            deadline: Some(Instant::now()),
        };
        let (result, _) = run_source("for i in range(1000000000):\n  pass\n", limits);
        assert!(result.is_err());
    }

    #[test]
    fn print_goes_to_stderr_and_items_come_back_sorted() {
        let (result, printed) = run_source(
            "print('a', 1)\nctx.resource_list['items'][0]['b'] = {'z': 1.0, 'a': [True, None, 'yes']}\nctx.resource_list['items'][0]['a'] = 2\n",
            Limits::default(),
        );
        assert_eq!(printed, "a 1\n");
        let items = result.unwrap_or_default();
        let item = &items[0];
        let keys: Vec<&str> = item.pairs().map(|(key, _)| key.value.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        let inner = item.get("b").cloned().unwrap_or_else(Node::new_mapping);
        assert_eq!(inner.get_str(&["z"]), Some("1"));
        let list = inner
            .get("a")
            .map(|list| list.content.clone())
            .unwrap_or_default();
        assert_eq!(list[0].value, "true");
        assert_eq!(list[1].tag(), tag::NULL);
        assert_eq!(list[2].style, Style::DOUBLE_QUOTED);
    }

    fn config_map(name: &str) -> Node {
        crate::yaml::parse_document(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n  list: [1, 2, 3]\n"
        ))
        .expect("parses")
        .expect("a document")
        .root()
        .clone()
    }

    fn run_on(items: Vec<Node>, source: &str) -> Result<Vec<Node>, String> {
        let program = Program {
            name: "test".to_owned(),
            source: source.to_owned(),
        };
        let input = ResourceList {
            items,
            function_config: None,
        };
        execute_on_own_stack(&program, &input, Limits::default()).0
    }

    /// The resource list is read back after the program, whatever the
    /// collector moved meanwhile (a list held in a Rust local segfaulted
    /// from ~60 resources on).
    #[test]
    fn large_resource_lists_survive_garbage_collection() {
        let items: Vec<Node> = (0..3000).map(|i| config_map(&format!("cm-{i}"))).collect();
        let source = "garbage = [str(i) * 10 for i in range(200000)]\nx = 1\n";
        let output = run_on(items, source).expect("runs");
        assert_eq!(output.len(), 3000);
        assert_eq!(
            crate::yaml::to_string(&output[2999], crate::yaml::SeqIndent::Compact),
            // Keys sorted, as Go's map marshalling writes them.
            "apiVersion: v1\ndata:\n  a: b\n  list:\n  - 1\n  - 2\n  - 3\nkind: ConfigMap\nmetadata:\n  name: cm-2999\n"
        );
    }

    #[test]
    fn deep_and_self_containing_values_are_errors() {
        let deep = "l = []\nfor i in range(5000):\n    l = [l]\nctx.resource_list['items'][0]['data'] = {'x': l}\n";
        let error = run_on(vec![config_map("a")], deep).expect_err("too deep");
        assert!(
            error.starts_with("starlark value nested deeper than 1000 levels"),
            "{error}"
        );
        let cycle = "x = []\nx.append(x)\nctx.resource_list['items'][0]['data'] = {'x': x}\n";
        let error = run_on(vec![config_map("a")], cycle).expect_err("contains itself");
        assert!(error.contains("(or containing itself)"), "{error}");
    }

    #[test]
    fn memory_is_bounded() {
        let growing = "l = []\nfor i in range(100000000):\n    l.append('x' * 64 + str(i))\n";
        let error = run_on(vec![config_map("a")], growing).expect_err("bounded");
        assert!(error.contains("Heap memory limit"), "{error}");
    }

    /// Found by the `starlark` fuzz target: a collection as a mapping key
    /// made starlark panic building the dict.
    #[test]
    fn collection_keys_are_an_error() {
        let node = crate::yaml::parse_document(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\ndata:\n  ? {a: b}\n  : c\n",
        )
        .expect("parses")
        .expect("a document")
        .root()
        .clone();
        assert_eq!(
            run_on(vec![node], "x = 1\n"),
            Err("resource has a dict as a mapping key".to_owned())
        );
    }

    /// go-yaml's aliasing rule: a few bytes of aliases do not expand into
    /// gigabytes of values.
    #[test]
    fn alias_bombs_are_refused_as_go_yaml_refuses_them() {
        let mut bomb = String::from(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n",
        );
        for level in 1..9 {
            let previous = level - 1;
            bomb.push_str(&format!(
                "  l{level}: &l{level} [*l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}, *l{previous}]\n"
            ));
        }
        let node = crate::yaml::parse_document(&bomb)
            .expect("parses")
            .expect("a document")
            .root()
            .clone();
        let started = std::time::Instant::now();
        let error = run_on(vec![node], "x = 1\n").expect_err("refused");
        assert_eq!(error, "yaml: document contains excessive aliasing");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        // Modest aliasing is fine.
        let node = crate::yaml::parse_document(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\ndata:\n  a: &a x\n  b: *a\n",
        )
        .expect("parses")
        .expect("a document")
        .root()
        .clone();
        assert!(run_on(vec![node], "x = 1\n").is_ok());
    }
}
