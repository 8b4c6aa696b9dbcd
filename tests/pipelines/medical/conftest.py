from tests.pipelines.llm.conftest import _one_torch_thread, tiny_llm, tiny_text_model  # noqa: F401
