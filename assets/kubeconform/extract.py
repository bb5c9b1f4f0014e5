#!/usr/bin/env python3
"""Extracts the Kubernetes JSON schema definitions the kubeconform builtin
embeds (`definitions-v1.37.0.json`) from the kubernetes-validate wheel.

Usage: extract.py WHEEL [OUT]

Only the non-strict `-local` definitions are vendored: the `-local-strict`
variant differs only by `additionalProperties: false` on every schema object
that declares `properties` (checked below), so the builtin derives strict
mode at load time. `description` and the `x-kubernetes-*` annotations other
than the group-version-kind are dropped: the validator does not read them.
"""

import json
import sys
import zipfile

VERSION = "v1.37.0"
BASE = "kubernetes_validate/kubernetes-json-schema/"
# Schema keywords the validator understands; everything else is dropped.
KEEP = {"type", "enum", "properties", "additionalProperties", "required",
        "items", "$ref", "allOf", "anyOf", "oneOf", "const", "not",
        "x-kubernetes-group-version-kind"}


def strip(schema):
    """The schema with only the keywords the validator reads."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key not in KEEP:
            continue
        if key == "properties":
            value = {name: strip(sub) for name, sub in value.items()}
        elif key in ("additionalProperties", "items", "not"):
            value = strip(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            value = [strip(sub) for sub in value]
        out[key] = value
    return out


def strictify(schema):
    """What the `-strict` variant adds: closed objects."""
    if isinstance(schema, list):
        return [strictify(sub) for sub in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strictify(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def main():
    wheel = zipfile.ZipFile(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else f"definitions-{VERSION}.json"
    plain = json.loads(wheel.read(f"{BASE}{VERSION}-local/_definitions.json"))["$defs"]
    strict = json.loads(wheel.read(f"{BASE}{VERSION}-local-strict/_definitions.json"))["$defs"]
    differing = [name for name in plain if strictify(plain[name]) != strict.get(name)]
    if differing or set(plain) != set(strict):
        sys.exit(f"strict variant is not derivable: {differing[:5]}")
    defs = {name: strip(schema) for name, schema in plain.items()}
    with open(out, "w") as file:
        json.dump({"$defs": defs}, file, separators=(",", ":"), sort_keys=True)
        file.write("\n")


if __name__ == "__main__":
    main()
