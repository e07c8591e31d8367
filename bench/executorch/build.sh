#!/usr/bin/env bash
# Builds et_webgpu_run: ExecuTorch's own runtime and WebGPU backend
# (backends/webgpu in pytorch/executorch), natively, against the same Dawn
# library wgnn uses, with our small runner (et_webgpu_run.cpp). It runs the
# same .pte files that `wgnn run` takes, so the two runtimes can be compared on
# outputs and speed.
#
#   bench/executorch/build.sh [--et-git DIR] [--commit SHA] OUT_DIR
#
#   --et-git DIR   an ExecuTorch git directory (a bare clone or a .git folder;
#                  no work tree or submodules needed). Or set ET_GIT.
#   --commit SHA   the ExecuTorch commit to build (default: the pinned one
#                  below). Or set ET_COMMIT.
#   OUT_DIR        where the sources are extracted (OUT_DIR/src/executorch),
#                  built (OUT_DIR/build) and the runner is put
#                  (OUT_DIR/et_webgpu_run).
#
# Environment (defaults in brackets, relative to the wgnn repository):
#   DAWN_LIBRARY      Dawn shared library with the webgpu.h C API
#                     [.deps/dawn/libwebgpu_wrapper.so]
#   DAWN_INCLUDE_DIR  folder holding webgpu/webgpu.h [.deps/webgpu/include]
#   ET_PYTHON         Python with torch (torchgen) and PyYAML, for ExecuTorch's
#                     kernel-registration codegen [.venv-executorch/bin/python,
#                     made by scripts/setup-executorch]
#   ET_PORTABLE_OPS   comma-separated ATen ops to register from ExecuTorch's
#                     portable CPU kernels, for the ops a partitioner leaves
#                     outside the WebGPU delegate [a short list, see below]
#   JOBS              parallel compile jobs [number of cores]
#
# Needs cmake (3.24+), a C++17 compiler, ninja or make, and Debian's flatc and
# flatbuffers headers (apt-get install flatbuffers-compiler libflatbuffers-dev):
# ExecuTorch's flatbuffers and flatcc submodules are not used. The program and
# delegate schemas are compiled by the system flatc; the other submodules the
# ExecuTorch CMake names (json, gflags, flatcc) get the empty stand-ins in
# cmake/third-party/, since nothing built here uses them.
#
# The result needs only the Dawn library (found through LD_LIBRARY_PATH or the
# RUNPATH, which names the executable's folder and DAWN_LIBRARY's folder) and
# system libraries: ExecuTorch is linked statically.
set -euo pipefail

PINNED_COMMIT=cff6f4dd32e630945b7188512c1f2b4f102b05ad
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

ET_GIT="${ET_GIT:-}"
ET_COMMIT="${ET_COMMIT:-$PINNED_COMMIT}"
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --et-git) ET_GIT="$2"; shift 2 ;;
    --commit) ET_COMMIT="$2"; shift 2 ;;
    -h|--help) sed -n '2,38p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$OUT" ] || { echo "build.sh: one OUT_DIR only" >&2; exit 2; }; OUT="$1"; shift ;;
  esac
done
die() { echo "build.sh: $*" >&2; exit 1; }
[ -n "$OUT" ] || die "usage: build.sh [--et-git DIR] [--commit SHA] OUT_DIR"
[ -n "$ET_GIT" ] || die "no ExecuTorch git directory: pass --et-git DIR or set ET_GIT"
git --git-dir="$ET_GIT" cat-file -e "$ET_COMMIT^{commit}" 2>/dev/null \
  || die "commit $ET_COMMIT is not in $ET_GIT"

DAWN_LIBRARY="${DAWN_LIBRARY:-$REPO/.deps/dawn/libwebgpu_wrapper.so}"
DAWN_INCLUDE_DIR="${DAWN_INCLUDE_DIR:-$REPO/.deps/webgpu/include}"
ET_PYTHON="${ET_PYTHON:-$REPO/.venv-executorch/bin/python}"
JOBS="${JOBS:-$(nproc)}"
# The ops outside the delegate in the .pte files we test (wgnn's fixtures and
# the model zoo) and a few that WebGPUPartitioner commonly leaves on the CPU.
ET_PORTABLE_OPS="${ET_PORTABLE_OPS:-aten::scalar_tensor.out,aten::mul.out,aten::mul.Scalar_out,aten::add.out,aten::any.out,aten::any.all_out,aten::any.dims_out,aten::as_strided_copy.out,aten::_native_batch_norm_legit.no_stats_out,aten::mean.out,aten::convolution.out,aten::addmm.out,aten::permute_copy.out,aten::relu.out,aten::view_copy.out,aten::atan2.out,aten::trunc.out,aten::arange.start_out,aten::full.out}"

[ -f "$DAWN_LIBRARY" ] || die "DAWN_LIBRARY $DAWN_LIBRARY not found"
[ -f "$DAWN_INCLUDE_DIR/webgpu/webgpu.h" ] || die "no webgpu/webgpu.h under DAWN_INCLUDE_DIR $DAWN_INCLUDE_DIR"
[ -x "$ET_PYTHON" ] || die "ET_PYTHON $ET_PYTHON not found (a Python with torch and PyYAML)"
"$ET_PYTHON" -c "import torchgen, yaml" 2>/dev/null || die "$ET_PYTHON lacks torch (torchgen) or PyYAML"
command -v flatc >/dev/null || die "flatc not found (apt-get install flatbuffers-compiler libflatbuffers-dev)"
[ -f /usr/include/flatbuffers/flatbuffers.h ] || die "flatbuffers headers not found (apt-get install libflatbuffers-dev)"
command -v cmake >/dev/null || die "cmake not found"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SRC="$OUT/src/executorch"   # the tree must be named executorch: its includes are <executorch/...>
BUILD="$OUT/build"
start=$(date +%s)

# 1. Sources: the commit's tree without its documentation and examples (some
#    example files are large objects a mirror may not hold). Re-extracted when
#    the commit changes.
if [ "$(cat "$OUT/src/COMMIT" 2>/dev/null || true)" != "$ET_COMMIT" ]; then
  echo "== extracting ExecuTorch $ET_COMMIT into $SRC"
  rm -rf "$OUT/src"
  mkdir -p "$SRC"
  git --git-dir="$ET_GIT" archive "$ET_COMMIT" -- . ':(exclude)examples' ':(exclude)docs' \
      ':(exclude)website' ':(exclude).github' 2>"$OUT/src/archive.log" | tar x -C "$SRC"
  [ -f "$SRC/backends/webgpu/CMakeLists.txt" ] && [ -f "$SRC/runtime/executor/program.cpp" ] \
    || { cat "$OUT/src/archive.log" >&2; die "extraction failed"; }
  # The submodules are absent; put the stand-ins where ExecuTorch's CMake looks.
  for d in json gflags flatcc; do
    mkdir -p "$SRC/third-party/$d"
    cp "$HERE/cmake/third-party/$d/CMakeLists.txt" "$SRC/third-party/$d/"
  done
  echo "$ET_COMMIT" > "$OUT/src/COMMIT"
fi

# 2. Configure.
echo "== configuring in $BUILD"
nice cmake -S "$HERE" -B "$BUILD" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DET_ROOT="$SRC" \
  -DDAWN_LIBRARY="$DAWN_LIBRARY" \
  -DDAWN_INCLUDE_DIR="$DAWN_INCLUDE_DIR" \
  -DPYTHON_EXECUTABLE="$ET_PYTHON" \
  -DET_FLATC="$(command -v flatc)" \
  -DET_PORTABLE_OPS="$ET_PORTABLE_OPS" >"$OUT/configure.log" 2>&1 \
  || { tail -40 "$OUT/configure.log" >&2; die "configure failed (log: $OUT/configure.log)"; }

# 3. Build the runner and what it links, nothing else.
echo "== building et_webgpu_run (-j$JOBS)"
nice cmake --build "$BUILD" --target et_webgpu_run -j "$JOBS"
cp "$BUILD/et_webgpu_run" "$OUT/et_webgpu_run"
echo "== built $OUT/et_webgpu_run in $(( $(date +%s) - start )) s"
