kk_tests(CPU test_dtype.cpp test_planner.cpp test_registry.cpp test_overlap.cpp test_c_api.cpp test_runtime.cpp GPU test_runtime_gpu.cpp test_device_errors_gpu.cpp)
