"""A tiny random-weight Gemma 3 with a character-level tokenizer (so strings, offsets and
attribution work) for the layer's tests, and the engine handle built from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.engine.tiny_models import VOCAB, tiny_hf_model

CHARS = [chr(c) for c in range(32, 127)] + ["\n"]


def write_char_tokenizer(folder: Path) -> None:
    """tokenizer.json: one token per character (BPE without merges), BOS id 1, unknown id 0."""
    from tokenizers import Tokenizer, decoders, models, processors

    vocab = {"<unk>": 0, "<bos>": 1}
    for ch in CHARS:
        vocab[ch] = len(vocab)
    assert len(vocab) <= VOCAB
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.add_special_tokens(["<unk>", "<bos>"])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<bos>"}))


@pytest.fixture(scope="session")
def tiny_text_model(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-gemma-chars")
    tiny_hf_model("gemma3", seed=3, max_position_embeddings=2048).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_llm(tiny_text_model):
    from pipelines.llm import EngineSettings, get_engine

    return get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=1024))


@pytest.fixture(autouse=True)
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
