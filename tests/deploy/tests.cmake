kk_tests(CPU test_llama_layer.cpp test_model_plan.cpp GPU test_llama_layer_gpu.cpp)
