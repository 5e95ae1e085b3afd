"""The ``transformers`` LLM provider: a causal LM from a local directory, in this process.

``AGTOS_<SLOT>_PROVIDER=transformers`` with ``AGTOS_<SLOT>_MODEL=/path/to/model-dir`` (a
``save_pretrained`` directory or a Hugging Face cache snapshot). The prompt goes through the
tokenizer's chat template; decoding is greedy and bounded by ``AGTOS_<SLOT>_MAX_TOKENS`` new tokens
and ``AGTOS_<SLOT>_TIMEOUT_S`` seconds. The model loads once per process (shared by every slot that
names the same directory) and generates on one worker thread, so in-process generations queue
instead of competing for the cores; the ResourceGuard treats the provider as a local model.
``json_mode`` is not enforced (there is no constrained decoding): the prompts ask for JSON.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agtos.providers.llm import LLMError
from agtos.providers.transformers_runtime import ModelDirError, import_transformers, load_once, read_config

log = logging.getLogger(__name__)

PROVIDER = "transformers"
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transformers-llm")


@dataclass(frozen=True)
class _CausalLM:
    model: Any
    tokenizer: Any
    context: int | None  # the model's position limit, when its config states one


def _load_causal_lm(model_dir: Path) -> _CausalLM:
    transformers = import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ModelDirError(f"{model_dir}: the tokenizer has no chat template (tokenizer_config.json)")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    model.eval()
    context = getattr(model.config, "max_position_embeddings", None)
    return _CausalLM(model, tokenizer, context if isinstance(context, int) else None)


class TransformersLLM:
    """Chat completion by a local causal LM (see the module docstring).

    A directory that is missing or not a model is noticed when the provider is built (``error``),
    a corrupt one when it first loads; either way :meth:`chat` raises :class:`LLMError` and the
    caller uses its built-in fallback.
    """

    name = PROVIDER

    def __init__(self, model_dir: str, *, max_new_tokens: int = 512, timeout_s: float = 60.0) -> None:
        self.model = model_dir
        self.max_new_tokens = max_new_tokens
        self.timeout_s = timeout_s
        self.error: str | None = None
        self._lm: _CausalLM | None = None
        if not model_dir:
            self.error = "the transformers provider needs a model directory (AGTOS_<SLOT>_MODEL)"
        else:
            try:
                read_config(Path(model_dir))
            except ModelDirError as exc:
                self.error = str(exc)
        if self.error:
            log.warning("LLM slot unusable, the built-in fallback answers instead: %s", self.error)

    @property
    def loaded(self) -> bool:
        return self._lm is not None

    def status(self) -> dict[str, Any]:
        """What ``/health`` shows for a slot served by this provider."""
        return {"provider": PROVIDER, "model": self.model, "loaded": self.loaded, "error": self.error}

    def load(self) -> _CausalLM:
        """The model (loaded on first use); :class:`LLMError` with the reason when it cannot be."""
        if self._lm is None:
            if self.error and not Path(self.model).is_dir():
                raise LLMError(self.error)
            try:
                self._lm = load_once("causal-lm", Path(self.model), _load_causal_lm)
            except ModelDirError as exc:
                self.error = str(exc)
                raise LLMError(self.error) from exc
            self.error = None
        return self._lm

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str:
        lm = self.load()
        future = _WORKER.submit(self._generate, lm, messages)
        try:  # generate() stops itself at timeout_s (max_time); the margin covers a queued call
            return future.result(timeout=self.timeout_s * 2 + 5)
        except FutureTimeout:
            raise LLMError(f"transformers generation did not finish within {self.timeout_s:g}s") from None

    def _generate(self, lm: _CausalLM, messages: list[dict[str, str]]) -> str:
        import torch

        try:
            encoded = lm.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as exc:  # a template that rejects these roles (e.g. no system role)
            raise LLMError(f"chat template failed: {exc!r:.200}") from exc
        ids, mask = encoded["input_ids"], encoded["attention_mask"]
        if lm.context is not None:  # keep the prompt's end: the newest turns and the question
            keep = max(1, lm.context - self.max_new_tokens)
            ids, mask = ids[:, -keep:], mask[:, -keep:]
        pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.tokenizer.eos_token_id
        with torch.inference_mode():
            out = lm.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=self.max_new_tokens,
                max_time=self.timeout_s,
                do_sample=False,
                pad_token_id=pad,
            )
        return str(lm.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)).strip()
