"""Constrained `generate()` in Hugging Face transformers: a `transformers.LogitsProcessor` with
xgrammar's name and signature (`xgrammar.contrib.hf.LogitsProcessor`).

    tokenizer_info = structgen.TokenizerInfo.from_huggingface(tokenizer, vocab_size=config.vocab_size)
    compiler = structgen.GrammarCompiler(tokenizer_info)
    grammars = [compiler.compile_json_schema(s) for s in schemas]     # one per row, or one for all
    model.generate(**inputs, logits_processor=[structgen.contrib.hf.LogitsProcessor(grammars)])

Each call accepts the token every unfinished row sampled last, fills the rows' masks in parallel
(`BatchGrammarMatcher`) and masks the scores in place (on the scores' device). A row whose
sequence has ended (a stop token accepted, or with `terminate_without_stop_token` its grammar
complete) is left unmasked: `generate` pads finished rows itself. Scores past the grammars'
vocabulary (a model's padded ids) are set to -inf on the other rows. A processor serves one
`generate()` call (its matchers hold the rows' positions); make a new one for the next.
"""

from typing import List, Optional, Union

import torch
import transformers

from ..compiler import CompiledGrammar
from ..matcher import (
    BatchGrammarMatcher,
    GrammarMatcher,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    reset_token_bitmask,
)


class LogitsProcessor(transformers.LogitsProcessor):
    """Masks the logits of every row of a batch by its own grammar."""

    def __init__(
        self,
        compiled_grammar: Union[CompiledGrammar, List[CompiledGrammar]],
        *,
        terminate_without_stop_token: bool = False,
    ) -> None:
        grammars = compiled_grammar if isinstance(compiled_grammar, list) else [compiled_grammar]
        if not grammars:
            raise ValueError("LogitsProcessor: no compiled grammar given")
        sizes = {g.tokenizer_info.vocab_size for g in grammars}
        if len(sizes) != 1:
            raise ValueError(
                f"LogitsProcessor: the grammars were compiled for vocabularies of different sizes {sorted(sizes)}"
            )
        self.compiled_grammars: List[CompiledGrammar] = grammars
        self.full_vocab_size = sizes.pop()
        self.terminate_without_stop_token = terminate_without_stop_token
        self.matchers: List[GrammarMatcher] = []
        self.token_bitmask: Optional[torch.Tensor] = None
        self.batch_size = 0
        self.prefilled = False
        self._batch = BatchGrammarMatcher()

    def _start(self, batch_size: int) -> None:
        grammars = self.compiled_grammars
        if len(grammars) == 1:
            grammars = grammars * batch_size
        if len(grammars) != batch_size:
            raise RuntimeError(
                f"LogitsProcessor: {len(grammars)} compiled grammars for a batch of {batch_size} rows "
                "(give one grammar, or one per row)"
            )
        self.batch_size = batch_size
        self.matchers = [
            GrammarMatcher(g, terminate_without_stop_token=self.terminate_without_stop_token)
            for g in grammars
        ]
        self.token_bitmask = allocate_token_bitmask(batch_size, self.full_vocab_size)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if not self.matchers:
            self._start(input_ids.shape[0])
        if input_ids.shape[0] != self.batch_size:
            raise RuntimeError(
                f"LogitsProcessor: input_ids has {input_ids.shape[0]} rows, the batch began with "
                f"{self.batch_size} (a processor serves one generate() call)"
            )
        if self.prefilled:
            for i, m in enumerate(self.matchers):
                if m.is_terminated():
                    continue
                token = int(input_ids[i, -1])
                if not m.accept_token(token):
                    raise RuntimeError(
                        f"LogitsProcessor: row {i} sampled token {token}, which its grammar refuses "
                        "(were the scores changed after this processor ran?)"
                    )
        self.prefilled = True
        live = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        reset_token_bitmask(self.token_bitmask)
        if live:
            self._batch.batch_fill_next_token_bitmask(
                [self.matchers[i] for i in live], self.token_bitmask, indices=live
            )
        mask = self.token_bitmask.to(scores.device, non_blocking=True)
        vocab = min(scores.shape[-1], self.full_vocab_size)
        apply_token_bitmask_inplace(scores, mask, vocab_size=vocab)
        if scores.shape[-1] > self.full_vocab_size and live:
            # Ids past the grammars' vocabulary (the model's padding) are never allowed.
            scores[live, self.full_vocab_size :] = float("-inf")
        return scores
