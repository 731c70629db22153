#!/usr/bin/env python3
"""An independent reading of a Hugging Face tokenizer.json, written from the format's
documentation and GPT-2's encoder.py, for tests of `brigade export`'s tokenizer file.

It covers what brigade writes: a Sequence pre-tokenizer of Split (a regex, behavior "Isolated")
and ByteLevel (use_regex false), a BPE model, a ByteLevel decoder. Anything else is refused.

    hf_tokenizer_reference.py encode tokenizer.json text.txt   # ids, one line, space-separated
    hf_tokenizer_reference.py decode tokenizer.json ids.txt    # the text's bytes on stdout
"""
import json
import re
import sys


def bytes_to_unicode():
    """GPT-2's map from bytes to printable stand-in characters (openai/gpt-2, encoder.py)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def load(path):
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    pre = tok["pre_tokenizer"]
    assert pre["type"] == "Sequence", pre
    split, byte_level = pre["pretokenizers"]
    assert split["type"] == "Split" and split["behavior"] == "Isolated", split
    assert not split["invert"], split
    assert byte_level["type"] == "ByteLevel" and not byte_level["use_regex"], byte_level
    assert not byte_level["add_prefix_space"], byte_level
    assert tok["decoder"]["type"] == "ByteLevel", tok["decoder"]
    model = tok["model"]
    assert model["type"] == "BPE", model["type"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    return split["pattern"]["Regex"], model["vocab"], ranks


def pieces_of(pattern, text):
    """Split with behavior Isolated: every match is a piece, and so is every gap between them."""
    out, pos = [], 0
    for m in re.finditer(pattern, text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return [p for p in out if p]


def bpe(word, ranks):
    """GPT-2's bpe(): merge the lowest-ranked adjacent pair everywhere, until none is left."""
    parts = list(word)
    while len(parts) > 1:
        pairs = [(ranks[p], p) for p in zip(parts, parts[1:]) if p in ranks]
        if not pairs:
            break
        _, (first, second) = min(pairs)
        merged, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                merged.append(first + second)
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return parts


def encode(path, text):
    pattern, vocab, ranks = load(path)
    stand_in = bytes_to_unicode()
    ids = []
    for piece in pieces_of(pattern, text):
        word = "".join(stand_in[b] for b in piece.encode("utf-8"))
        ids.extend(vocab[t] for t in bpe(word, ranks))
    return ids


def decode(path, ids):
    _, vocab, _ = load(path)
    by_id = {i: s for s, i in vocab.items()}
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    return bytes(byte_of[c] for i in ids for c in by_id[i])


def main():
    command, tokenizer, data = sys.argv[1:4]
    if command == "encode":
        with open(data, encoding="utf-8", newline="") as f:
            print(" ".join(map(str, encode(tokenizer, f.read()))))
    elif command == "decode":
        with open(data) as f:
            ids = [int(t) for t in f.read().split()]
        sys.stdout.buffer.write(decode(tokenizer, ids))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
