"""The worker side: the model runner, the forward context it builds for one step, CUDA-graph decode."""
