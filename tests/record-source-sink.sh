#!/usr/bin/env bash
# Records kpt's `fn source PKG | fn sink OUT` output as the oracle that
# tests/cases/kpt/source_sink.rs compares krender against, so `cargo test` on a clone
# without kpt or the shared conformance data still has the expected bytes.
#
# Usage: tests/record-source-sink.sh [CONFORMANCE_DIR]   (run from the repo root)
# CONFORMANCE_DIR defaults to $KRENDER_SHARED/conformance, else
# ../shared/conformance next to the repo (as the tests find it).
# Needs kpt 1.0.0-beta.56 on PATH. Rewrites fixtures/source-sink/cases/.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
conf=${1:-${KRENDER_SHARED:-$repo/../shared}/conformance}
dest=$repo/fixtures/source-sink/cases
rm -rf "$dest"
mkdir -p "$dest"

# record NAME ROOT REL: ROOT/REL is the package; NAME is the case directory.
record() {
  local name=$1 root=$2 rel=$3
  local case=$dest/$name
  mkdir -p "$case"
  printf '%s\n' "$rel" >"$case/input"
  # Run from the package's parent with a relative path, as a user would.
  local parent base
  parent=$(dirname "$root/$rel")
  base=$(basename "$rel")
  if (cd "$parent" && kpt fn source "$base") >"$case/source.yaml" 2>/dev/null; then
    kpt fn sink "$case/out" <"$case/source.yaml" 2>"$case/sink.stderr" || echo "sink failed" >>"$case/sink.stderr"
    [ -s "$case/sink.stderr" ] || rm -f "$case/sink.stderr"
    # An empty package writes no directory at all; keep the case visible.
    mkdir -p "$case/out"
  else
    # kpt's message names absolute paths; only the failure is recorded.
    rm -f "$case/source.yaml"
    : >"$case/source.failed"
  fi
}

# Shared conformance: every kpt-fn-render case (the directory holding
# .expected/), and every top-level package of porch-render.
if [ -d "$conf" ]; then
  while IFS= read -r exp; do
    rel=${exp#"$conf"/}
    rel=${rel%/.expected}
    record "$(printf '%s' "$rel" | tr '/' '~')" "$conf" "$rel"
  done < <(find "$conf/kpt-fn-render" -type d -name .expected | sort)
  while IFS= read -r kf; do
    rel=${kf#"$conf"/}
    rel=${rel%/Kptfile}
    case "$rel" in porch-render/*/*/*) continue ;; esac
    record "$(printf '%s' "$rel" | tr '/' '~')" "$conf" "$rel"
  done < <(find "$conf/porch-render" -name Kptfile | sort)
fi

# The repo's own fixtures: every package directory that is not inside
# another package (fn source already includes subpackages).
while IFS= read -r kf; do
  dir=$(dirname "$kf")
  rel=${dir#"$repo"/}
  case "$rel" in fixtures/source-sink*) continue ;; esac
  up=$(dirname "$dir") nested=0
  while [ "$up" != "$repo/fixtures" ] && [ "$up" != "$repo" ]; do
    [ -f "$up/Kptfile" ] && nested=1
    up=$(dirname "$up")
  done
  [ $nested = 1 ] && continue
  record "$(printf '%s' "$rel" | tr '/' '~')" "$repo" "$rel"
done < <(find "$repo/fixtures" -name Kptfile | sort)
