#!/usr/bin/env bash
# The vendored crates' own library tests: hyper (scalws-core/vendor/hyper,
# `cargo test --lib --features full`) and h2 (scalws-core/vendor/h2,
# `cargo test --lib`, less its HPACK fixture tests: they read the
# hpack-test-case stories from a `fixtures/` directory that the published
# crate does not carry), each run in a copy outside the workspace, since
# neither is a workspace member and `cargo test --workspace` never builds
# their tests. Run it after changing a vendored crate (its PATCHED.md says
# what was changed and which of its tests were adjusted).
#
#   scripts/vendor-tests.sh              # both
#   CRATES=hyper scripts/vendor-tests.sh # one
#
# Variables:
#   CRATES  a subset of "hyper h2" (default both)
#   WORK    where the copies and their build go (default target/vendor-tests,
#           kept between runs so a second run builds only what changed;
#           its own target directory, never the workspace's)
#
# The copies resolve their dev-dependencies from crates.io (the registry is
# the only network this needs). A first run builds for a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

CRATES="${CRATES:-hyper h2}"
WORK="${WORK:-target/vendor-tests}"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

say() { echo "vendor-tests.sh: $*" >&2; }

failed=()
for crate in $CRATES; do
    case "$crate" in
        hyper) features=(--features full); skip=() ;;
        h2) features=(); skip=(--skip hpack::test::fixture) ;;
        *) say "unknown crate '$crate' (hyper or h2)"; exit 2 ;;
    esac
    src="scalws-core/vendor/$crate"
    copy="$WORK/$crate"
    rm -rf "$copy"
    cp -r "$src" "$copy"
    # A workspace of its own: the copy lies under the project's directory,
    # and cargo would otherwise take the project's Cargo.toml for its root.
    printf '\n[workspace]\n' >> "$copy/Cargo.toml"
    say "$crate: cargo test --lib ${features[*]} -- ${skip[*]} in $copy"
    if ! (cd "$copy" && CARGO_TARGET_DIR="$WORK/target" \
            cargo test -j2 --lib "${features[@]}" -- "${skip[@]}" 2>&1 | tail -n 5); then
        failed+=("$crate")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    say "failed: ${failed[*]}"
    exit 1
fi
say "all passed: $CRATES"
