"""The engine core: requests (sequences), the scheduler, sampling, metrics, and the step loop."""
