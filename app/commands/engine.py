"""CLI commands over the engine: `longdoc generate`, `ask` and `bench` (registered by app.cli).

The engine (torch, transformers) is imported inside each command so that `longdoc --help` stays fast.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def generate(
        prompt: str = typer.Argument(..., help="The prompt text."),
        max_tokens: int = typer.Option(64, "--max-tokens", "-n", help="Tokens to generate at most."),
        temperature: float = typer.Option(0.0, "--temperature", "-t", help="0 = greedy."),
        top_p: float = typer.Option(1.0, "--top-p"),
        top_k: int = typer.Option(0, "--top-k", help="0 = off."),
        repetition_penalty: float = typer.Option(1.0, "--repetition-penalty"),
        seed: int | None = typer.Option(None, "--seed"),
        stop: list[str] = typer.Option([], "--stop", help="Stop at this string (repeatable)."),
        chat: bool = typer.Option(False, "--chat", help="Wrap the prompt in the model's chat template "
                                                        "(an instruction-tuned model's; the default is a base model)."),
        device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: cuda if available)."),
        dtype: str | None = typer.Option(None, "--dtype", help="float32, bfloat16 or float16."),
        model: Path | None = typer.Option(None, "--model", help="GGUF file or HF folder (default: Gemma 3 270M)."),
        max_model_len: int | None = typer.Option(None, "--max-model-len", help="Context limit in tokens."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of streaming text."),
    ) -> None:
        """Generate a continuation of PROMPT with the local engine."""
        from app.ask import settings
        from engine import EngineError, SamplingParams, has_chat_template
        from pipelines.llm import EngineUnavailable

        try:
            params = SamplingParams(
                max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                repetition_penalty=repetition_penalty, stop=list(stop), seed=seed,
            )
            chosen = settings(model, device, dtype, max_model_len)
            if chat and not has_chat_template(chosen.model):  # metadata only: before the weights load
                which = ("the default Gemma 3 270M is a base model" if chosen.model is None
                         else f"{chosen.model} has none")
                typer.echo(f"longdoc: --chat needs a model with a chat template; {which}; "
                           "drop --chat or pass --model", err=True)
                raise typer.Exit(2)
            t0 = time.perf_counter()
            llm = _load(chosen, quiet=as_json)
            load_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            if chat:
                out = llm.chat([{"role": "user", "content": prompt}], params)
                if not as_json:
                    typer.echo(out.text)
            elif as_json:
                out = llm.generate(prompt, params)[0]
            else:
                for delta in llm.stream(prompt, params):
                    sys.stdout.write(delta.text)
                    sys.stdout.flush()
                sys.stdout.write("\n")
                return
        except (EngineError, EngineUnavailable, ValueError) as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            gen_s = time.perf_counter() - t1
            typer.echo(json.dumps({
                "model": str(llm.model_path),
                "device": str(llm.device),
                "dtype": str(llm.dtype).removeprefix("torch."),
                "prompt": prompt,
                "text": out.text,
                "token_ids": out.token_ids,
                "finish_reason": out.finish_reason,
                "prompt_tokens": len(out.prompt_token_ids),
                "completion_tokens": len(out.token_ids),
                "load_seconds": round(load_s, 3),
                "generate_seconds": round(gen_s, 3),
            }, ensure_ascii=False))

    @app.command()
    def ask(
        files: list[Path] = typer.Argument(..., help="The document(s): .txt, .md, .docx or .pdf (several are joined)."),
        question: list[str] = typer.Option(..., "--question", "-q",
                                           help="A question about the document (repeatable: all answered in one batch)."),
        instructions: str | None = typer.Option(None, "--instructions",
                                                help="Text put before the document (default: a short task line)."),
        fallback: str = typer.Option(
            "retrieval", "--fallback",
            help="When the document does not fit: error, truncate:head, truncate:tail, truncate:middle, retrieval "
                 "(the chunks most relevant to the question) or map_reduce."),
        max_tokens: int = typer.Option(128, "--max-tokens", "-n", help="Tokens per answer at most."),
        cache_dir: Path | None = typer.Option(
            None, "--cache-dir",
            help="Keep the document's KV on disk here: a later run over the same document skips its prefill."),
        cache_bytes: int = typer.Option(8 * 2**30, "--cache-bytes", help="The disk cache never grows past this."),
        device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: cuda if available)."),
        dtype: str | None = typer.Option(None, "--dtype", help="float32, bfloat16 or float16."),
        model: Path | None = typer.Option(None, "--model", help="GGUF file or HF folder (default: Gemma 3 270M)."),
        max_model_len: int | None = typer.Option(None, "--max-model-len", help="Context limit in tokens."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object: answers, timings, fallback reports."),
    ) -> None:
        """Answer questions about a long document with the local engine, evidence first.

        Each answer is the passage that holds it, quoted with its file, page and offsets, the value
        asked for marked inside it, a calibrated confidence, and the model's wording only where the
        quote carries it; "not stated in the document" (with the nearest passages) when no passage
        is good enough. The questions are submitted together and the document's KV is computed once
        for all of them (and kept for a later run with --cache-dir); progress goes to stderr."""
        from app import ask as asking
        from app.commands.llm_options import answer_lines, llm_progress
        from engine import EngineError
        from pipelines.documents import IngestError, load_document
        from pipelines.llm import EngineUnavailable, LLMRun

        try:
            policy = asking.policy_for(fallback)
        except ValueError as exc:  # malformed: a usage error
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(2) from None
        except EngineError as exc:  # an unknown strategy or side
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        if max_tokens < 1 or any(not q.strip() for q in question):
            typer.echo("longdoc: --max-tokens must be >= 1 and every --question non-empty", err=True)
            raise typer.Exit(2)
        try:
            docs = [load_document(f) for f in files]
        except IngestError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        try:
            t0 = time.perf_counter()
            settings = asking.settings(model, device, dtype, max_model_len, cache_dir, cache_bytes)
            llm = _load(settings, quiet=as_json)
            load_s = time.perf_counter() - t0
            with llm_progress(disable=as_json) as on_progress:
                run = LLMRun("off", settings, engine=llm, on_progress=on_progress)
                answers = run.ask(docs, list(question), fallback=policy, max_tokens=max_tokens,
                                  instructions=asking.INSTRUCTIONS if instructions is None else instructions)
        except (EngineError, EngineUnavailable, ValueError) as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        record = run.records[-1] if run.records else None
        if not as_json:
            typer.echo("\n".join(answer_lines(answers)).rstrip())
            if record is not None and record.reason:
                typer.echo(f"longdoc: {record.reason}", err=True)
        else:
            typer.echo(json.dumps({
                "files": [str(f) for f in files],
                "model": str(llm.model_path),
                "device": str(llm.device),
                "load_seconds": round(load_s, 3),
                "step": None if record is None else record.model_dump(mode="json"),
                "answers": [a.model_dump(mode="json") for a in answers],
                "counters": llm.counters().to_dict(),
            }, ensure_ascii=False, default=str))
        if any(a.error is not None for a in answers):
            raise typer.Exit(1)

    @app.command()
    def bench(
        prompt_length: int = typer.Option(1024, "--prompt-length", "-p", help="Tokens per prompt (random ids)."),
        max_new_tokens: int = typer.Option(32, "--max-new-tokens", "-n", help="Tokens generated per request."),
        batch: int = typer.Option(1, "--batch", "-b", help="Requests sent at once."),
        repeat: int = typer.Option(2, "--repeat", help="Rounds over the same prompts (later rounds hit the prefix cache)."),
        memory_profile: bool = typer.Option(False, "--memory-profile", help="Weights, KV pool, KV bytes per token, peaks."),
        output_format: str = typer.Option("text", "--output-format", help="text or json."),
        device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: cuda if available)."),
        dtype: str | None = typer.Option(None, "--dtype", help="float32, bfloat16 or float16."),
        model: Path | None = typer.Option(None, "--model", help="GGUF file or HF folder (default: Gemma 3 270M)."),
        chunk: int | None = typer.Option(None, "--chunk", help="Prefill chunk (tokens); default: the engine's (sized from memory on CUDA, 1024 elsewhere)."),
        warm_budget: int = typer.Option(0, "--warm-budget", help="Bytes of INT8 warm pages (0: no warm tier)."),
        hot_window: int = typer.Option(1024, "--hot-window", help="Most recent tokens kept at full precision."),
        sink_tokens: int = typer.Option(16, "--sink-tokens", help="First tokens kept at full precision."),
        warm_sliding: bool = typer.Option(False, "--warm-sliding",
                                          help="Sliding-window layers' older in-window blocks go INT8 too."),
        demote_watermark: float | None = typer.Option(
            None, "--demote-watermark",
            help="Demote to INT8 only while the hot pool is more than this share full (0-1]; default: always."),
        seed: int = typer.Option(0, "--seed"),
    ) -> None:
        """Measure the engine on a synthetic load: TTFT, inter-token latency, tokens/s, counters, memory."""
        from engine import LLM, CacheConfig, EngineError, SchedulerConfig
        from engine.bench import format_text, run_bench

        if output_format not in ("text", "json"):
            typer.echo("longdoc: --output-format must be text or json", err=True)
            raise typer.Exit(2)
        if prompt_length < 1 or max_new_tokens < 1 or batch < 1 or repeat < 1:
            typer.echo("longdoc: --prompt-length, --max-new-tokens, --batch and --repeat must be >= 1", err=True)
            raise typer.Exit(2)
        try:
            cache = CacheConfig(warm_budget=warm_budget or None, hot_window=hot_window, sink_tokens=sink_tokens,
                                warm_sliding=warm_sliding, demote_watermark=demote_watermark)
            llm = LLM(model=model, device=device, dtype=dtype, cache=cache,
                      scheduler=SchedulerConfig(max_num_seqs=batch, max_prefill_chunk=chunk))
            llm.check_len(prompt_length + max_new_tokens)
            res = run_bench(llm, prompt_length, max_new_tokens, batch=batch, repeat=repeat, seed=seed,
                            memory_profile=memory_profile)
        except (EngineError, ValueError) as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(json.dumps(res, indent=2) if output_format == "json" else format_text(res))


def _load(chosen, quiet: bool = False):
    """The engine for `chosen` (EngineSettings), saying on stderr what is loading and how long it
    took: loading the weights takes 10-30 s on a CPU, and a silent terminal looks hung."""
    from pipelines.llm import get_engine

    if quiet:
        return get_engine(chosen)
    from rich.console import Console

    err = Console(stderr=True)
    t0 = time.perf_counter()
    with err.status(f"loading the model ({chosen.describe()}) …"):
        llm = get_engine(chosen)
    err.print(f"model loaded in {time.perf_counter() - t0:.1f} s ({llm.model_path.name} on {llm.device})",
              highlight=False)
    return llm
