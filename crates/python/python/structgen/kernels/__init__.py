"""Kernels that apply a token bitmask to logits: the native CPU one (float32 in Rust, float16 /
bfloat16 through torch) and one written in torch operations for any device."""
