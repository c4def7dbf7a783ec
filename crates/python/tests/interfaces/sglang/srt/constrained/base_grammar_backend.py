"""Stand-in for SGLang's grammar backend interface and its registry."""

from typing import Any, Dict, List, Optional, Tuple


class BaseGrammarObject:
    def __init__(self) -> None:
        self._finished = False

    def accept_token(self, token: int) -> None:
        raise NotImplementedError

    def rollback(self, k: int) -> None:
        raise NotImplementedError

    def is_terminated(self) -> bool:
        raise NotImplementedError

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        raise NotImplementedError

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        raise NotImplementedError

    @staticmethod
    def fill_vocab_mask_batched(entries: List[Any], vocab_mask: Any) -> None:
        for entry in entries:
            entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        raise NotImplementedError

    def copy(self) -> "BaseGrammarObject":
        raise NotImplementedError

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        raise NotImplementedError

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        raise NotImplementedError

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        raise NotImplementedError


INVALID_GRAMMAR_OBJ = BaseGrammarObject()


class BaseGrammarBackend:
    def __init__(self) -> None:
        self.cache: Dict[Tuple[str, str], Any] = {}

    def dispatch_json(self, key_string: str) -> Any:
        raise NotImplementedError

    def dispatch_regex(self, key_string: str) -> Any:
        raise NotImplementedError

    def dispatch_ebnf(self, key_string: str) -> Any:
        raise NotImplementedError

    def dispatch_structural_tag(self, key_string: str) -> Any:
        raise NotImplementedError


GRAMMAR_BACKEND_REGISTRY: Dict[str, Any] = {}


def register_grammar_backend(name: str, init_func: Any) -> None:
    GRAMMAR_BACKEND_REGISTRY[name] = init_func


def create_grammar_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[set] = None) -> Any:
    return GRAMMAR_BACKEND_REGISTRY[server_args.grammar_backend](server_args, tokenizer, vocab_size, eos_token_ids)
