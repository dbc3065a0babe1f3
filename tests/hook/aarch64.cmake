# Hook engine tests on an AArch64 target (included by CMakeLists.txt).
