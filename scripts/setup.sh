#!/usr/bin/env bash
# Installs what building and testing Tutti needs, and only what is missing.
#
# Run by `npm start`, `npm test` and .ci/run before anything else. It must work on a fresh
# Debian machine (as root, no terminal, CI=true) and cost almost nothing when all is present,
# so every step checks first and installs second. Any failure stops the script with a message.
#
#   apt:     emscripten (builds libopus into the worklet's codec module: npm start needs it)
#   apt:     for the tests only (not for npm start): chromium (headless browser tests),
#            pulseaudio and pulseaudio-utils (a sound server with 128-frame callbacks for the
#            browser), iptables (iptables-legacy's NFQUEUE: impaired networks via bench/impair),
#            unzip (checks the exported archives), jacktrip and jackd2 (the real JackTrip client
#            on a dummy-driver JACK server, with jack_simple_client and jack_rec, for the
#            JackTrip interop test), redis-server (the shared directory of the test that runs one
#            room over three hub processes), firefox-esr, webkit2gtk-driver and xvfb (the other
#            engines' browser tests)
#   rustup:  wasm32-unknown-unknown target, rustfmt and clippy components
#   rustup:  a nightly toolchain (minimal profile), for the fuzz targets (tests only)
#   cargo:   wasm-pack (pinned), wasm-bindgen-cli (exactly the version wasm/Cargo.toml pins),
#            cargo-fuzz (pinned; builds and runs the fuzz targets in `npm test`; tests only),
#            geckodriver (pinned; drives Firefox ESR in the browser tests; tests only)
#   npm:     node_modules from package-lock.json (includes binaryen's wasm-opt, which the
#            build puts first on PATH: Debian's older wasm-opt breaks wasm-bindgen output)
set -euo pipefail

# TUTTI_SETUP=start (npm start): only what building and serving need. Anything else: the tests too.
FOR_TESTS=1
[ "${TUTTI_SETUP:-test}" = start ] && FOR_TESTS=""

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
export DEBIAN_FRONTEND=noninteractive

WASM_PACK_VERSION="0.15.1"
CARGO_FUZZ_VERSION="0.13.2"
GECKODRIVER_VERSION="0.37.1"

START_NS=$(date +%s%N)
log() { printf 'setup: %s\n' "$*"; }
die() {
  printf 'setup: ERROR: %s\n' "$*" >&2
  exit 1
}
trap 'printf "setup: ERROR: line %s failed: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@" || die "needs root for: $* (sudo -n refused; run it once by hand)"
  else
    die "needs root for: $*"
  fi
}

# --- Debian packages -------------------------------------------------------------------------
apt_missing=()
command -v emcc >/dev/null 2>&1 || apt_missing+=(emscripten)
if [ -n "$FOR_TESTS" ]; then
  [ -x /usr/bin/chromium ] || apt_missing+=(chromium)
  command -v pulseaudio >/dev/null 2>&1 || apt_missing+=(pulseaudio)
  command -v pactl >/dev/null 2>&1 || apt_missing+=(pulseaudio-utils)
  command -v iptables-legacy >/dev/null 2>&1 || apt_missing+=(iptables)
  command -v unzip >/dev/null 2>&1 || apt_missing+=(unzip)
  # The real JackTrip client and a JACK server (with jack_simple_client, jack_rec) for the
  # JackTrip interop test.
  command -v jacktrip >/dev/null 2>&1 || apt_missing+=(jacktrip)
  command -v jack_rec >/dev/null 2>&1 || apt_missing+=(jackd2)
  # Redis, the directory hub processes share when one room spans them (the cascade test).
  command -v redis-server >/dev/null 2>&1 || apt_missing+=(redis-server)
  # The other engines, driven over WebDriver (tests/kit/webdriver.mjs): Firefox ESR (its
  # driver, geckodriver, comes from crates.io below), WebKitGTK's WebDriver with its
  # MiniBrowser, and Xvfb, the display MiniBrowser needs (it has no headless mode).
  [ -x /usr/bin/firefox-esr ] || apt_missing+=(firefox-esr)
  command -v WebKitWebDriver >/dev/null 2>&1 || apt_missing+=(webkit2gtk-driver)
  command -v Xvfb >/dev/null 2>&1 || apt_missing+=(xvfb)
fi
if [ ${#apt_missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${apt_missing[*]} and no apt-get to install them"
  log "apt-get update"
  as_root apt-get update -q
  log "apt-get install ${apt_missing[*]}"
  as_root apt-get install -y -q --no-install-recommends "${apt_missing[@]}"
elif [ -n "$FOR_TESTS" ]; then
  log "ok    emscripten, chromium, pulseaudio, iptables, unzip, jacktrip, jackd2, redis-server"
else
  log "ok    emscripten"
fi

# --- Rust toolchain --------------------------------------------------------------------------
command -v cargo >/dev/null 2>&1 || die "cargo not found (install Rust with rustup first)"
command -v rustup >/dev/null 2>&1 || die "rustup not found: needed to add the wasm32 target"

installed_targets="$(rustup target list --installed)"
if grep -qx 'wasm32-unknown-unknown' <<<"$installed_targets"; then
  log "ok    rust target wasm32-unknown-unknown"
else
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

installed_components="$(rustup component list --installed)"
for comp in rustfmt clippy; do
  if grep -q "^${comp}\(-\|$\)" <<<"$installed_components"; then
    log "ok    rust component $comp"
  else
    log "rustup component add $comp"
    rustup component add "$comp"
  fi
done

# Installs crate $1 at version $2 with `cargo install --locked` unless `$3 --version` (a command,
# split on spaces) already prints that version as its second word.
cargo_tool() {
  local have
  # shellcheck disable=SC2086 # the command is meant to split
  have="$($3 --version 2>/dev/null | head -n1 | awk '{print $2}' || true)"
  if [ "$have" = "$2" ]; then
    log "ok    $1 $2"
  else
    log "cargo install $1 $2 (found: ${have:-none}; takes a few minutes)"
    cargo install "$1" --locked --version "$2"
  fi
}

# --- wasm-pack -------------------------------------------------------------------------------
cargo_tool wasm-pack "$WASM_PACK_VERSION" wasm-pack

# --- wasm-bindgen-cli, exactly the version the wasm crate pins ------------------------------
# wasm-pack builds its own copy (slowly) when the one on PATH differs from the crate's version.
bindgen_version="$(sed -nE 's/^[[:space:]]*wasm-bindgen[[:space:]]*=[[:space:]]*(\{[^}]*version[[:space:]]*=[[:space:]]*)?"=?([0-9]+\.[0-9]+\.[0-9]+)".*/\2/p' wasm/Cargo.toml | head -n1)"
[ -n "$bindgen_version" ] || die "could not read the wasm-bindgen version from wasm/Cargo.toml"
if [ -f Cargo.lock ]; then
  locked="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)"
  if [ -n "$locked" ] && [ "$locked" != "$bindgen_version" ]; then
    die "wasm/Cargo.toml pins wasm-bindgen $bindgen_version but Cargo.lock has $locked: pin with \"=X\""
  fi
fi
have_bindgen="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [ "$have_bindgen" = "$bindgen_version" ]; then
  log "ok    wasm-bindgen-cli $bindgen_version"
else
  log "cargo install wasm-bindgen-cli $bindgen_version (found: ${have_bindgen:-none}; takes a few minutes)"
  # No --locked: the CLI's own lockfile names a crate version the registry does not serve.
  cargo install wasm-bindgen-cli --version "$bindgen_version" --force
fi

# --- fuzzing: a nightly toolchain and cargo-fuzz ----------------------------------------------
# Only for the tests: `npm start` does not need them.
if [ -n "$FOR_TESTS" ]; then
  if rustup toolchain list | grep '^nightly' >/dev/null; then
    log "ok    rust toolchain nightly"
  else
    log "rustup toolchain install nightly (minimal profile)"
    rustup toolchain install nightly --profile minimal
  fi
  cargo_tool cargo-fuzz "$CARGO_FUZZ_VERSION" "cargo fuzz"
  cargo_tool geckodriver "$GECKODRIVER_VERSION" geckodriver
fi

# --- npm packages ----------------------------------------------------------------------------
command -v npm >/dev/null 2>&1 || die "npm not found (install Node.js 20 or newer)"
stamp=node_modules/.package-lock.json
need_npm=""
if [ ! -d node_modules ] || [ ! -f "$stamp" ]; then
  need_npm="node_modules missing"
elif [ -f package-lock.json ] && [ package-lock.json -nt "$stamp" ]; then
  need_npm="package-lock.json is newer than node_modules"
elif [ package.json -nt "$stamp" ]; then
  need_npm="package.json is newer than node_modules"
fi
if [ -n "$need_npm" ]; then
  npm_flags=(--no-audit --no-fund)
  if [ -f package-lock.json ] && { [ -n "${CI:-}" ] || ! [ package.json -nt package-lock.json ]; }; then
    log "npm ci ($need_npm)"
    npm ci "${npm_flags[@]}" </dev/null
  else
    log "npm install ($need_npm)"
    npm install "${npm_flags[@]}" </dev/null
  fi
  # npm leaves its marker untouched when nothing changed; mark the tree as current.
  touch "$stamp"
else
  log "ok    node_modules"
fi
[ -x node_modules/.bin/wasm-opt ] || die "node_modules/.bin/wasm-opt missing (devDependency binaryen)"
[ -x node_modules/.bin/vite ] || die "node_modules/.bin/vite missing (devDependency vite)"

elapsed_ms=$((($(date +%s%N) - START_NS) / 1000000))
log "done in $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s"
