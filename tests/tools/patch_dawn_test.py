"""scripts/patch-dawn-vec4-tiles on a small stand-in for Dawn's tree (the five
files it edits, reduced to the declarations and code it looks for), with the
table generator off (WGNN_PATCH_DAWN_NO_GEN=1): the new overloads land after
the 8-bit ones, the SPIR-V writer's load divides by the element ratio in its
test and both divisions, the robustness transform counts vec4 arrays in
halves; a second run edits nothing; a tree whose writer is not as expected
is refused with nothing written; a missing tree is refused.
  patch_dawn_test.py WORKDIR"""
import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "patch-dawn-vec4-tiles")
work = sys.argv[1]
MARK = "wgnn: f16 from vec4<u32> tiles"

DEFS = {
    "wgsl": ("src/tint/lang/wgsl/wgsl.def",
             "fn a()\n"
             "@must_use implicit(K: subgroup_matrix_kind, S: u8, C: num, R: num, AC: num)\n"
             "  fn subgroupMatrixLoad<T: subgroup_matrix<K, S, C, R> >(ptr<workgroup_or_storage, array<u32, AC>, readable>,\n"
             "      offset: u32, @const col_major: bool, stride: u32) -> T\n"
             "fn subgroupMatrixStore()\n"),
    "core": ("src/tint/lang/core/core.def",
             "implicit(K: subgroup_matrix_kind, S: u8, C: num, R: num, AC: num)\n"
             "  fn subgroupMatrixLoad<T: subgroup_matrix<K, S, C, R> >(ptr<workgroup_or_storage, array<u32, AC>, readable>,\n"
             "      offset: u32, @const col_major: bool, stride: u32) -> T\n"
             "fn b()\n"),
    "spirv": ("src/tint/lang/spirv/spirv.def",
              "implicit(K: subgroup_matrix_kind, S: u8, C: num, R: num)\n"
              "  fn cooperative_matrix_load<T: subgroup_matrix<K, S, C, R> >(\n"
              "    ptr<workgroup_or_storage, u32, readable>, u32, u32, literal) -> T\n"
              "fn cooperative_matrix_store()\n"),
    "writer": ("src/tint/lang/spirv/writer/raise/builtin_polyfill.cc",
               "void SubgroupMatrixLoad(X builtin) {\n"
               "  if (result_ty->Type()->Size() == 1u && arr->ElemType()->Size() == 4u) {\n"
               "    stride = div(stride, u32(4));\n"
               "    offset = div(offset, u32(4));\n"
               "  }\n"
               "}\n"
               "void SubgroupMatrixStore(X builtin) {\n"
               "  if (value_type->Type()->Size() == 1u) { offset = div(offset, u32(4)); }\n"
               "}\n"),
    "robust": ("src/tint/lang/core/ir/transform/robustness.cc",
               "    uint32_t components_per_element = 1;\n"
               "    auto* arr_ty = arr->Type()->UnwrapPtr()->As<core::type::Array>();\n"
               "    TINT_IR_ASSERT(ir, arr_ty);\n"
               "    use(components_per_element);\n"),
}


def make_tree(path, writer=None):
    shutil.rmtree(path, ignore_errors=True)
    for key, (rel, body) in DEFS.items():
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(writer if key == "writer" and writer is not None else body)


def read(path, key):
    with open(os.path.join(path, DEFS[key][0])) as f:
        return f.read()


def run(path):
    env = dict(os.environ, WGNN_PATCH_DAWN_NO_GEN="1")
    return subprocess.run([sys.executable, script, path], capture_output=True, text=True, env=env, timeout=60)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


tree = os.path.join(work, "dawn")
make_tree(tree)
p = run(tree)
check(p.returncode == 0, f"first run exit {p.returncode}: {p.stderr}")
wgsl = read(tree, "wgsl")
check(wgsl.count("ptr<workgroup, array<vec4<u32>, AC>, readable>") == 1, "wgsl.def: no vec4 overload")
check(wgsl.index("array<vec4<u32>, AC>") > wgsl.index("array<u32, AC>") and
      wgsl.index("array<vec4<u32>, AC>") < wgsl.index("fn subgroupMatrixStore"), "wgsl.def: overload out of place")
check("S: f16" in wgsl and "@test_value(8) stride" in wgsl, "wgsl.def: overload not for f16 / no test value")
core = read(tree, "core")
check(core.count("ptr<workgroup, array<vec4<u32>, AC>, readable>") == 1 and "@test_value" not in core,
      "core.def: overload missing or in wgsl.def's form")
spirv = read(tree, "spirv")
check(spirv.count("ptr<workgroup_or_storage, vec4<u32>, readable>") == 1 and
      spirv.index("vec4<u32>") < spirv.index("fn cooperative_matrix_store"), "spirv.def: overload missing or out of place")
writer = read(tree, "writer")
load = writer[:writer.index("void SubgroupMatrixStore")]
store = writer[writer.index("void SubgroupMatrixStore"):]
ratio = "(arr->ElemType()->Size() / result_ty->Type()->Size())"
check(f"if ({ratio} > 1u" in load and load.count(f"u32({ratio})") == 2 and "u32(4)" not in load,
      "writer: the load's test and divisions not by the ratio:\n" + load)
check(store == DEFS["writer"][1][DEFS["writer"][1].index("void SubgroupMatrixStore"):], "writer: the store was edited")
robust = read(tree, "robust")
check("arr_ty->ElemType()->Is<type::Vector>()" in robust and
      robust.index("Is<type::Vector>") > robust.index("TINT_IR_ASSERT(ir, arr_ty);"), "robustness: no vec4 count after arr_ty")
before = {k: read(tree, k) for k in DEFS}
p = run(tree)
check(p.returncode == 0 and "already" in p.stdout, f"second run: exit {p.returncode}, {p.stdout}{p.stderr}")
check(all(read(tree, k) == before[k] for k in DEFS), "second run changed a file")
check(all(MARK in before[k] for k in DEFS), "a file lacks the mark")

# A writer not as expected: refused, and no file written.
odd = os.path.join(work, "odd")
make_tree(odd, writer="void SubgroupMatrixLoad(X b) {\n}\nvoid SubgroupMatrixStore(X b) {\n}\n")
p = run(odd)
check(p.returncode != 0 and "builtin_polyfill.cc" in p.stderr, f"odd writer: exit {p.returncode}, {p.stderr}")
check(all(MARK not in read(odd, k) for k in DEFS), "odd writer: files written before the refusal")

p = run(os.path.join(work, "nowhere"))
check(p.returncode != 0 and "no Tint sources" in p.stderr, f"missing tree: exit {p.returncode}, {p.stderr}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("patch-dawn-vec4-tiles: edits in place, idempotent, refusals before writing")
