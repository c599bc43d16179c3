"""Retrieval on every dev set in one run: each retrieval mode beside a separate MiniLM encoder,
split by how many words a question shares with its answer.

Why: BM25 carries questions that use the documents' own words; questions in a user's own words
must be carried by the model's embedding. A single hit@k over a set hides which of the two a
change helped, so every table is split: "low overlap" questions are those where fewer than
LOW_OVERLAP of the question's content words (stemmed, stopwords dropped: BM25's own tokens) occur
in the best-matching chunk of a right file; "the rest" are the others.

For each set (`--sets`; the Rust-book dev questions and the paraphrased Python-docs questions by
default, from ../shared/data) the script ingests the folder into its collection incrementally, as
`unirag eval rag` does, then scores file-level hit@1/3/5 and MRR (`unirag/evaluation/rag.py`) for:
dense (EOS embeddings), lexical (BM25), hybrid (both fused), default (hybrid + the same-model
rerank, what `unirag ask` runs) and, when the `reference` extra is installed, all-MiniLM-L6-v2
over the same chunks (dense).

`--as-is SET=COLLECTION` also scores an existing collection of a set's documents without
ingesting into it (e.g. one built by an earlier reader, for a before/after in the same run).

    python benchmarks/retrieval.py [--db runs/db] [--sets rust,pydocs] [--modes dense,lexical,hybrid,default]
        [--no-reference] [--as-is pydocs=pydocs-old] [--query-prefix "Question: " --query-prefix ""]
        [--output runs/bench/retrieval.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

DATA = Path("../shared/data")
SETS = {  # name: (documents, questions, collection)
    "rust": (DATA / "docs/rust-book/src", DATA / "eval/rag/rust_book_dev.jsonl", "rust"),
    "pydocs": (DATA / "docs/python-docs", DATA / "eval/rag/python_docs_dev.jsonl", "pydocs-main"),
}
MODES = ("dense", "lexical", "hybrid", "default")
LOW_OVERLAP = 0.5
METRICS = ("hit@1", "hit@3", "hit@5", "rr")


def content_words(texts: list[str]) -> list[set[str]]:
    """Each text's BM25 tokens (stemmed words, stopwords dropped) as a set."""
    from unirag.retrieval.lexical import tokenize

    tokenized = tokenize(texts)
    words = {i: w for w, i in tokenized.vocab.items()}
    return [{words[i] for i in ids} for ids in tokenized.ids]


def overlaps(questions, collection) -> list[float]:
    """Per question: the largest share of its content words found in one chunk of a right file."""
    from unirag.evaluation.rag import same_file
    from unirag.retrieval.lexical import chunk_words
    from unirag.retrieval.store import pages

    chunks = [(meta["source"], chunk_words(doc, meta))
              for got in pages(collection, ["documents", "metadatas"])
              for doc, meta in zip(got["documents"], got["metadatas"])]
    chunk_sets = content_words([text for _, text in chunks])
    out = []
    for q, asked in zip(questions, content_words([q.question for q in questions])):
        gold = [words for (source, _), words in zip(chunks, chunk_sets) if any(same_file(source, f) for f in q.files)]
        out.append(max((len(asked & words) / len(asked) for words in gold), default=0.0) if asked else 0.0)
    return out


def summarize(rows: list[dict], subset: list[int]) -> dict:
    """Mean hit@k and MRR (x100) over the questions at `subset`."""
    if not subset:
        return {m: None for m in METRICS}
    return {m: 100 * sum(rows[i][m] for i in subset) / len(subset) for m in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="runs/db")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--no-reference", action="store_true", help="leave out all-MiniLM-L6-v2")
    parser.add_argument("--as-is", action="append", default=[], metavar="SET=COLLECTION",
                        help="also score this existing collection of SET's documents, without ingesting")
    parser.add_argument("--adapter", default="default",
                        help="adapter to measure; its collections are named <collection>-<adapter folder name>")
    parser.add_argument("--query-prefix", action="append", default=None, metavar="TEXT",
                        help="the dense search's cue before a question (default: the adapter's own); "
                             "repeat it to compare cues in one run, as extra rows named mode [cue]")
    parser.add_argument("--output", default="runs/bench/retrieval.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.cli.options import DEFAULT_RERANK
    from unirag.evaluation.rag import load_questions, run_rag_eval
    from unirag.retrieval.ingest import ingest
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load(adapter=args.adapter)
    prefixes = args.query_prefix if args.query_prefix is not None else [model.query_prefix]
    client = connect(args.db)
    results, table = {}, []
    suffix = "" if args.adapter == "default" else "-" + Path(args.adapter).name
    runs_to_do = [(name, SETS[name][2] + suffix, True) for name in args.sets.split(",")]
    for spec in args.as_is:
        name, _, collection_name = spec.partition("=")
        runs_to_do.append((name, collection_name, False))
    for name, collection_name, fresh in runs_to_do:
        docs, questions_path, _ = SETS[name]
        questions = load_questions(questions_path)
        collection = open_collection(client, collection_name, model, create=fresh)
        if fresh:
            print(f"{name}: {ingest(model, collection, docs).line()}", flush=True)
        else:
            name = f"{name} ({collection_name}, as is)"
        share = overlaps(questions, collection)
        low = [i for i, s in enumerate(share) if s < LOW_OVERLAP]
        rest = [i for i, s in enumerate(share) if s >= LOW_OVERLAP]
        runs = {}
        for n, prefix in enumerate(prefixes):
            model.query_prefix = prefix
            for mode in args.modes.split(","):
                if n and mode == "lexical":
                    continue  # BM25 never reads the cue
                label = mode if n == 0 else f"{mode} [{prefix!r}]"
                runs[label] = run_rag_eval(model, collection, questions, mode="hybrid" if mode == "default" else mode,
                                           rerank=DEFAULT_RERANK if mode == "default" else 0)
        model.query_prefix = prefixes[0]
        if not args.no_reference:
            try:
                from unirag.evaluation.reference import ReferenceRetriever

                reference = ReferenceRetriever.over(collection)
            except Exception as err:  # the reference extra is optional
                print(f"{name}: all-MiniLM-L6-v2 left out: {type(err).__name__}: {err}", flush=True)
            else:
                runs["MiniLM"] = run_rag_eval(model, collection, questions, retriever=reference.retrieve)
        results[name] = {"chunks": collection.count(), "overlap": share, "low_overlap": len(low), "rest": len(rest),
                         "runs": {}}
        for mode, run in runs.items():
            rows = run["per_question"]
            split = {part: summarize(rows, subset) for part, subset in
                     (("all", list(range(len(rows)))), ("low overlap", low), ("rest", rest))}
            results[name]["runs"][mode] = {"metrics": run["metrics"], "split": split,
                                           "per_question": [{m: r[m] for m in ("q", *METRICS)} for r in rows]}
            for part, scores in split.items():
                n = {"all": len(rows), "low overlap": len(low), "rest": len(rest)}[part]
                table.append([name, mode, f"{part} ({n})",
                              *("" if scores[m] is None else f"{scores[m]:.1f}" for m in METRICS)])
        print(f"{name}: {collection.count()} chunks; {len(low)} of {len(questions)} questions share less than "
              f"{LOW_OVERLAP:.0%} of their words with a right chunk", flush=True)
    print(markdown_table(("set", "retrieval", "questions", "hit@1", "hit@3", "hit@5", "MRR"), table))
    print(f"wrote {write_json(args.output, {'benchmark': 'retrieval', 'model': model.name, 'machine': machine_info(), 'low_overlap_below': LOW_OVERLAP, 'query_prefixes': prefixes, 'sets': results})}")


if __name__ == "__main__":
    main()
