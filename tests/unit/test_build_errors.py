from patchkit.parsers.compiler import failed_objects, first_compiler_error
from patchkit.series import describe_failure, parse_hunks, patch_body, patch_subject

NVCC = """[12/30] Building CUDA object ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o
FAILED: ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_8.cu.o
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler ... -c x.cu
/src/ggml/src/ggml-cuda/fattn-mma-f16.cuh(630): error: zero-sized variable "KQ_C" is not allowed in device code
/src/ggml/src/ggml-cuda/fattn-mma-f16.cuh(731): error: static assertion failed with "bad loop size"
ninja: build stopped: subcommand failed.
"""

GCC = """[3/9] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o
FAILED: src/CMakeFiles/llama.dir/llama.cpp.o
/src/llama.cpp: In function 'int f()':
/src/llama.cpp:12:5: error: 'foo' was not declared in this scope
"""


def test_first_compiler_error_nvcc_and_gcc():
    assert (
        first_compiler_error(NVCC)
        == '/src/ggml/src/ggml-cuda/fattn-mma-f16.cuh:630: zero-sized variable "KQ_C" is not allowed in device code'
    )
    assert first_compiler_error(GCC) == "/src/llama.cpp:12: 'foo' was not declared in this scope"
    assert first_compiler_error("[1/1] Linking\n") is None


def test_cmake_error_is_found():
    log = (
        "-- Found CUDAToolkit\n"
        "CMake Error at ggml/src/ggml-cuda/CMakeLists.txt:3 (find_package):\n  Could not find cuBLAS\n"
    )
    assert first_compiler_error(log) == "ggml/src/ggml-cuda/CMakeLists.txt:3: CMake Error: Could not find cuBLAS"


def test_failed_objects_map_to_their_first_error():
    failed = failed_objects(NVCC, "/src")
    [(obj, err)] = failed.items()
    assert obj.endswith("fattn-mma-f16-instance-ncols1_1-ncols2_8.cu.o")
    assert err == 'ggml/src/ggml-cuda/fattn-mma-f16.cuh:630: zero-sized variable "KQ_C" is not allowed in device code'
    assert failed_objects(NVCC)[obj].startswith("/src/ggml/src/ggml-cuda/fattn-mma-f16.cuh:630: ")


PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@b>
Subject: [PATCH] cuda: a long subject that git folded
 onto a second line

Body line one.

Body line two.
---
diff --git a/ggml/src/a.cu b/ggml/src/a.cu
index 1111111..2222222 100644
--- a/ggml/src/a.cu
+++ b/ggml/src/a.cu
@@ -10,3 +10,3 @@ void f()
-x
+y
@@ -40,2 +40,2 @@
-p
+q
diff --git a/b.h b/b.h
--- a/b.h
+++ b/b.h
@@ -1 +1 @@
-1
+2
"""


def test_patch_hunks_subject_and_body():
    hs = parse_hunks(PATCH)
    assert [(h.file, h.index, h.old_start) for h in hs] == [
        ("ggml/src/a.cu", 1, 10),
        ("ggml/src/a.cu", 2, 40),
        ("b.h", 1, 1),
    ]
    assert patch_subject(PATCH) == "cuda: a long subject that git folded onto a second line"
    assert patch_body(PATCH) == "Body line one.\n\nBody line two."


def test_describe_failure_names_file_and_hunk(tmp_path):
    p = tmp_path / "x.patch"
    p.write_text(PATCH)
    assert (
        describe_failure(p, "error: patch failed: ggml/src/a.cu:40\nerror: ggml/src/a.cu: patch does not apply")
        == "file ggml/src/a.cu, hunk #2 (@@ -40,2 +40,2 @@)"
    )
    assert describe_failure(p, "CONFLICT (content): Merge conflict in b.h") == "file b.h, hunks #1"
