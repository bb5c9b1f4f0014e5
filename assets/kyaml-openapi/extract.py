#!/usr/bin/env python3
"""Builds the Kubernetes OpenAPI definitions that the format builtin and
Starlark's `ctx.open_api` use (`definitions-v1.21.json.gz`): kyaml's
bundled Kubernetes 1.21 schema plus kyaml's Kustomization schema.

Usage: extract.py SDIST [OUT]
  SDIST: kubernetes-validate-1.21.0.tar.gz (`pip download --no-deps
         --no-binary :all: kubernetes-validate==1.21.0`)

The sdist's `v1.21.0-local/_definitions.json` is the `definitions` object
of the Kubernetes 1.21.0 OpenAPI document as openapi2jsonschema rewrote
it. Its one rewrite that changes types is undone here: IntOrString and
Quantity were replaced by `oneOf` unions; the OpenAPI document declares
both `type: string` (IntOrString with `format: int-or-string`), which is
what kyaml's formatter reads. (Their descriptions are not in the sdist.)
"""

import gzip
import json
import sys
import tarfile

MEMBER = ("kubernetes-validate-1.21.0/src/kubernetes_validate/"
          "kubernetes-json-schema/v1.21.0-local/_definitions.json")

RESTORED = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
        {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
}


def kustomize_group(kind):
    return [{"group": "kustomize.config.k8s.io", "kind": kind, "version": "v1beta1"}]


def closed(properties, kind):
    return {"properties": properties, "additionalProperties": False,
            "type": "object", "x-kubernetes-group-version-kind": kustomize_group(kind)}


def ref(name):
    return {"$ref": "#/definitions/io.k8s.api.apps.v1." + name}


def strings():
    return {"items": {"type": "string"}, "type": "array"}


def merge_list(name):
    return {"items": ref(name), "type": "array",
            "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}


# kyaml's kustomizationapi/swagger.json, which kyaml loads beside the
# Kubernetes document.
KUSTOMIZATION = {
    "io.k8s.api.apps.v1.ConfigMapArgs": closed({"GeneratorArgs": ref("GeneratorArgs")}, "ConfigMapArgs"),
    "io.k8s.api.apps.v1.SecretArgs": closed(
        {"GeneratorArgs": ref("GeneratorArgs"), "type": {"type": "string"}}, "SecretArgs"),
    "io.k8s.api.apps.v1.GeneratorArgs": closed(
        {"namespace": {"type": "string"}, "name": {"type": "string"},
         "behavior": {"type": "string"}, "KvPairSources": ref("KvPairSources")}, "GeneratorArgs"),
    "io.k8s.api.apps.v1.Kustomization": dict(
        {"required": ["TypeMeta"]},
        **closed({"configMapGenerator": merge_list("ConfigMapArgs"),
                  "secretGenerator": merge_list("SecretArgs")}, "Kustomization")),
    "io.k8s.api.apps.v1.KvPairSources": closed(
        {"literals": strings(), "files": strings(), "envs": strings(),
         "env": {"type": "string"}}, "KvPairSources"),
}


def main():
    sdist = tarfile.open(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else "definitions-v1.21.json.gz"
    definitions = json.load(sdist.extractfile(MEMBER))["definitions"]
    unions = [name for name, schema in definitions.items() if "oneOf" in schema]
    if sorted(unions) != sorted(RESTORED):
        sys.exit(f"unexpected unions: {unions}")
    definitions.update(RESTORED)
    definitions.update(KUSTOMIZATION)
    text = json.dumps({"definitions": definitions}, separators=(",", ":"), sort_keys=True) + "\n"
    # mtime 0: the same input always gives the same bytes.
    with open(out, "wb") as file:
        file.write(gzip.compress(text.encode(), compresslevel=9, mtime=0))


if __name__ == "__main__":
    main()
