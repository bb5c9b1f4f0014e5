#!/usr/bin/env python3
"""A model of Deckhand's substitution, for krender's tests (written here, not
Deckhand's code): documents are Python objects, a substitution inserts
`copy.copy` of the source value into a `copy.copy` of the destination's data
(creating missing mappings on the way), documents render in Deckhand's order
(networkx's topological sort of the substitution graph, reversed, then the
rest), and `src.deepcopy` takes `copy.deepcopy`. No layering actions or
patterns: the sets it generates have none.

usage: deckhand-model.py KRENDER FIRST_SEED LAST_SEED
Generates a document set per seed in which charts substitute from sources
and write inside what they took, renders it with the model and with
`KRENDER layer render`, and prints one line per difference, then a summary
"compared N, differences D, both failed F". Exit 1 on any difference.
Needs PyYAML, networkx and jsonpath-ng.
"""
import copy, json, random, subprocess, sys, tempfile, os
import yaml, networkx, jsonpath_ng


def norm(path):
    return "$" if path == "." else ("$" + path if path.startswith(".") else path)


def get(data, path):
    found = jsonpath_ng.parse(norm(path)).find(data)
    return found[0].value if found else None


def replace(data, value, path):
    data_copy, value_copy = copy.copy(data), copy.copy(value)
    parsed = jsonpath_ng.parse(norm(path))
    if not parsed.find(data_copy):
        d = data_copy
        for piece in norm(path).split(".")[1:]:
            if piece not in d:
                d.setdefault(piece, {})
            d = d.get(piece)
    return parsed.update(copy.copy(data_copy), copy.copy(value_copy))


def model(docs):
    meta = lambda d: (d["schema"], d["metadata"]["layeringDefinition"]["layer"], d["metadata"]["name"])
    by_meta = {}
    for d in docs:
        by_meta.setdefault(meta(d), d)
    sources = {(d["schema"], d["metadata"]["name"]): d for d in by_meta.values()}
    graph = networkx.DiGraph()
    for d in by_meta.values():
        for sub in d["metadata"].get("substitutions", []):
            src = sources.get((sub["src"]["schema"], sub["src"]["name"]))
            if src:
                graph.add_edge(meta(d), meta(src))
    order = [by_meta[m] for m in reversed(list(networkx.topological_sort(graph)))]
    order += [d for d in by_meta.values() if d not in order]
    for d in order:
        for sub in d["metadata"].get("substitutions", []):
            src = sources[(sub["src"]["schema"], sub["src"]["name"])]
            value = get(src["data"], sub["src"]["path"])
            if value is None:
                raise KeyError(sub["src"]["path"])
            if sub["src"].get("deepcopy"):
                value = copy.deepcopy(value)
            out = replace(d["data"], value, sub["dest"]["path"])
            if isinstance(d["data"], dict) and isinstance(out, dict):
                d["data"].update(out)
            else:
                d["data"] = out
    result = {d["metadata"]["name"]: d["data"] for d in docs}
    json.dumps(result)  # a value containing itself fails here, as in Deckhand's storage
    return result


def tree(depth, rnd):
    if depth == 0:
        return rnd.choice(["x", "y", 1, 2, True])
    return {k: tree(depth - 1, rnd) for k in rnd.sample("abcd", rnd.randint(1, 3))}


def mapping_paths(value, prefix=""):
    if not isinstance(value, dict):
        return []
    out = [prefix] if prefix else []
    for key, child in value.items():
        out += mapping_paths(child, prefix + "." + key)
    return out


def generate(seed):
    rnd = random.Random(seed)
    doc = lambda schema, name, data, subs=None: {
        "schema": schema,
        "metadata": dict(
            {"schema": "metadata/Document/v1", "name": name,
             "layeringDefinition": {"abstract": False, "layer": "global"}},
            **({"substitutions": subs} if subs else {})),
        "data": data,
    }
    sources = [("s%d" % i, {"a": tree(4, rnd), "b": tree(4, rnd)}) for i in range(rnd.randint(1, 3))]
    docs = [doc("ex/Src/v1", name, data) for name, data in sources]
    for j in range(rnd.randint(1, 5)):
        subs, dests = [], []
        for _ in range(rnd.randint(1, 4)):
            name, data = rnd.choice(sources)
            if dests and rnd.random() < 0.6:
                dest = rnd.choice(dests) + "".join("." + rnd.choice("abcdxyz") for _ in range(rnd.randint(1, 2)))
            else:
                dest = ".v" + "".join("." + rnd.choice("abcd") for _ in range(rnd.randint(0, 2)))
            dests.append(dest)
            src = {"schema": "ex/Src/v1", "name": name, "path": rnd.choice(mapping_paths(data))}
            if rnd.random() < 0.15:
                src["deepcopy"] = True
            subs.append({"src": src, "dest": {"path": dest}})
        docs.append(doc("ex/Chart/v1", "c%d" % j, {"v": {}}, subs))
    policy = {"schema": "deckhand/LayeringPolicy/v1",
              "metadata": {"schema": "metadata/Control/v1", "name": "policy"},
              "data": {"layerOrder": ["global"]}}
    return [policy] + docs


def main():
    krender, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    compared = differences = both_failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(first, last):
            docs = generate(seed)
            path = os.path.join(scratch, "set%d.yaml" % seed)
            with open(path, "w") as f:
                yaml.safe_dump_all(docs, f, sort_keys=False)
            try:
                expected, model_error = model([d for d in copy.deepcopy(docs) if d["schema"] != "deckhand/LayeringPolicy/v1"]), None
            except Exception as error:
                expected, model_error = None, type(error).__name__
            run = subprocess.run([krender, "layer", "render", path], capture_output=True, text=True, timeout=60)
            if model_error or run.returncode != 0:
                if model_error and run.returncode != 0:
                    both_failed += 1
                else:
                    differences += 1
                    print("seed %d: model %s, krender exit %d %s" % (seed, model_error, run.returncode, run.stderr[:300]))
                continue
            compared += 1
            rendered = {d["metadata"]["name"]: d["data"] for d in yaml.safe_load_all(run.stdout) if d}
            for name, data in expected.items():
                if rendered.get(name) != data:
                    differences += 1
                    print("seed %d: %s\n  krender %s\n  model   %s" % (seed, name, rendered.get(name), data))
                    break
    print("compared %d, differences %d, both failed %d" % (compared, differences, both_failed))
    sys.exit(1 if differences else 0)


main()
