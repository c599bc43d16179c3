"""Evidence selection: the few sentences of the retrieved chunks that answer the question.

Why: a 135M-parameter model shown three whole chunks rarely uses the one sentence that answers;
shown the right sentence, it can quote it. So the chunks are cut into units (prose sentences,
code lines: `sentences.py`) and each unit is scored against the question with the same model:

- "likelihood": query likelihood (UPR, as the rerank scores chunks) of the question after the
  unit alone (laid out as the embedding lays it out, the unit then EOS, and "Question:");
- "embedding": cosine of the question's EOS embedding and the unit's;
- "answer": how much more likely the model finds the unit as an answer after the question than
  without it (pointwise mutual information; removes the bias towards generic, fluent text). Its
  "without" half is the unit's words' likelihood with nothing before them, its first word aside.

The scorers' rankings are fused by reciprocal rank (the fusion hybrid search uses). Units
are offered to the word budget in turns (`offer_order`): the fusion's best, then the best of
each LEADERS scorer's own ranking not yet offered, then the fusion's next, and so on; each is
taken while it fits `max_words`, counted with one word more for the "[n]" it will be quoted
with; a signpost's turn goes to the unit after it (`passed_on`). Units that do not stand
alone are quoted with what they need (`whole_thoughts.py`): a sentence that opens the body of a
definition with the term it defines (`term_of`) or not at all, a later sentence of an API
definition's body after that term and "— …" (`defined_by`) or not at all, and such a term
with its first sentence where it fits (alone, it still names what to use); a code line that
goes on a statement (it ends with a comma or closes brackets) from the earlier line whose
bracket it sits inside (`statement_of`) or not at all; a code line that opens what its next
lines go on (`opens_block`: "fn main() {") with them, or after a first quote not at all;
where the pair fits or as the first quote, a unit ending in ":" with the unit it introduces
(a code line with as many further lines of its block as fit: `block_after`), a unit that
points back with the sentence before it (`sentence_before`) and a code line after the line
that binds the name it opens with (`binding_of`); where it fits, a section's first
sentence after the heading it leaves its subject to (`title_of`).
`relevance` is the best unit's query likelihood minus the question's likelihood after an empty
passage: how much the evidence explains the question, comparable across questions, which is
what abstention thresholds; `answer_gain`, the best unit's "answer" score, is
abstention's second test: passages that explain the question's topic may still hold nothing the
question makes likelier as its answer.

Cost: the embedding, the likelihood and the answer's "without" half come from one pass per unit
(`scoring.read`: causal attention lets the question follow the embedded unit without changing its
embedding); the answer's "after the question" half is a second pass, on the question's KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from unirag.model.scoring import read, shared_context_loglikelihoods
from unirag.answer.sentences import Unit, split_units, word_count
from unirag.answer.whole_thoughts import (Name, announces, asks, binding_of, block_after, closes_unopened, defined_by, one_block,
                             opens_block, points_ahead, points_back, quotable, says_something, section_name,
                             sentence_before, starts_mid_sentence, statement_of, term_of, title_of)

# the unit scorers fused; others (a draft answer's embedding, shared words, the chunk's rank) quoted
# the keys no more often (docs/RESULTS.md, "Answers")
SCORERS = ("likelihood", "embedding", "answer")
# the scorers whose own best unit is offered right after the fusion's best (`offer_order`), in
# this order: the two generative judges, each the first to find the answering unit for some questions
LEADERS = ("likelihood", "answer")
FUSION_K = 10  # reciprocal-rank constant: small, since a question has tens of units, not thousands
MAX_WORDS = 54  # with one "[n]" per quoted span, an extractive answer stays within 60 words
# how far the first quote may run past the word budget where its unit needs more to stand alone
# (a term, the sentence it points back to): with MAX_WORDS, an answer stays within 60 words, the
# most a short answer holds (`evaluation.answers.MAX_WORDS`). Only where no candidate's quote
# fits that is the first quote longer
FIRST_QUOTE_OVERRUN = 6
MAX_UNIT_TOKENS = 48  # a unit scored as an answer is cut to this many tokens
# a passage none of whose units' EOS embeddings has this cosine to the question's is about something
# else, and `choose` does not quote it (a small collection shows its nearest passages even when one
# is off the question); 0.1 under the line below which `ask` abstains, so on-topic pages stay
OFF_TOPIC_BELOW = 0.4
# what follows a unit (as `embed` lays it out: the unit, then EOS) before the question whose
# likelihood after it is scored: shorter than the rerank's instruction, and no worse
UNIT_PROMPT = "\nQuestion:"


@dataclass(frozen=True)
class Span:
    """One evidence unit: hits[hit].text[start:end]; cited as [hit + 1]."""

    hit: int
    start: int
    end: int
    text: str
    score: float = 0.0       # fused score (higher is better)
    likelihood: float = 0.0  # mean log-probability of the question after this unit
    cut_before: bool = False  # the sentence began before the span (a long sentence's later piece)
    cut_after: bool = False   # the sentence goes on after the span
    code: bool = False  # the span opens with a code line
    # what the span describes (`whole_thoughts.defined_by`: a definition's term, a code section's
    # name), quoted before it with a dash: the span itself never names what it is about
    name: Name | None = None
    after_name: bool = False  # the span comes right after its name: no "…" between them


@dataclass(frozen=True)
class Evidence:
    """The selected spans, in the order they were taken (`offer_order`), and how strongly the best
    one explains the question."""

    spans: list[Span]
    relevance: float  # best unit's likelihood minus the question's likelihood after an empty passage
    # the best unit's "answer" score: how much likelier it is as an answer after the question than
    # alone (mean log-probability per token); None when that scorer did not run
    answer_gain: float | None = None
    # per passage (hit), its best unit's likelihood; -inf for a passage with no quotable unit
    passage_likelihood: tuple[float, ...] = ()
    # the best unit's "embedding" score: the cosine of its embedding to the question's; None when
    # that scorer did not run
    similarity: float | None = None

    @property
    def words(self) -> int:
        return sum(word_count(s.text) for s in self.spans)

    def renumbered(self, order: Sequence[int]) -> "Evidence":
        """The same evidence for the passages reordered as `order` (order[new] = old number)."""
        new = {old: i for i, old in enumerate(order)}
        return replace(self, spans=[replace(s, hit=new[s.hit]) for s in self.spans],
                       passage_likelihood=tuple(self.passage_likelihood[i] for i in order))


def passage_order(evidence: Evidence) -> list[int]:
    """The passages in the order to show them: their retrieval order fused (reciprocal rank, equal
    weights, ties to the retrieval order) with the order of their best unit's likelihood.

    Why: the rerank judges a whole chunk, and a paraphrased question's likelihood after 256 tokens
    is diluted by everything the chunk says besides its answer. The evidence pass has already
    read every unit of the shown passages alone, so each passage's best unit (the max over its
    units, as MaxP scores a document by its best piece) comes free and helps settle which shown
    passage goes first (docs/RESULTS.md, "Answers")."""
    from unirag.retrieval.lexical import reciprocal_rank_fusion

    n = len(evidence.passage_likelihood)
    by_unit = sorted(range(n), key=lambda i: -evidence.passage_likelihood[i])  # stable: ties keep retrieval order
    fused = reciprocal_rank_fusion([[str(i) for i in range(n)], [str(i) for i in by_unit]])
    return [int(i) for i, _ in fused]


@dataclass(frozen=True)
class _Candidate:
    hit: int
    unit: Unit
    text: str
    heading: str
    following: Unit | None = None  # the next unit of the same chunk, if any
    # where it announces `following` and that is a code line, the lines of its block after it
    # (`block_after`)
    example: tuple[Unit, ...] = ()
    term: Unit | None = None  # the term whose definition this unit opens (`term_of`), if any
    previous: Unit | None = None  # the sentence it may point back to (`sentence_before`), if any
    previous_term: Unit | None = None  # the term whose definition `previous` opens (`term_of`), if any
    title: Unit | None = None  # the heading of the section it opens (`title_of`), if it needs one
    binding: Unit | None = None  # the line binding the name a code line opens with (`binding_of`)
    statement: Unit | None = None  # the line opening the bracket a code line sits inside (`statement_of`)
    # where it is (the last line of) the term of the next unit (`term_of`), that whole term, its
    # other names above it included ("-d" above "--delete"): alone it names a thing
    # ("`--build-project`", "os.path.expanduser(path)") and says nothing of it
    heads: Unit | None = None
    # what it describes (`defined_by`): the term of the definition whose body it goes on, or the
    # name of the code section it is in (from the chunk's heading path where the chunk opens in it)
    defined: Name | None = None
    after_name: bool = False  # it is the first unit after that name in the chunk's text
    # a code line that opens what the next lines of its block go on (`opens_block`): quoted with
    # them, or not at all
    opens: bool = False


def _normal(text: str) -> str:
    return " ".join(text.split()).lower()


def candidates(hits: Sequence) -> list[_Candidate]:
    """Every quotable unit of every hit, with the text around it. Retrieved chunks overlap, so a
    unit contained in one already taken from a higher-ranked hit (a sentence cut by the chunk's
    edge, or the same sentence again) is left out, as are a sentence tail at a chunk's start and a
    question (`asks`)."""
    out: list[_Candidate] = []
    taken: list[str] = []
    for i, hit in enumerate(hits):
        units = split_units(hit.text)
        terms = [term_of(hit.text, units, k) for k in range(len(units))]
        defined = defined_by(hit.text, units, terms, section_name(hit.heading or ""))
        for j, unit in enumerate(units):
            text = hit.text[unit.start:unit.end]
            normal = _normal(text)
            if (not quotable(text) or (not unit.code and asks(text))
                    or starts_mid_sentence(hit.text, unit, j == 0) or closes_unopened(hit.text, units, j)
                    or any(normal in seen for seen in taken)):
                continue
            taken.append(normal)
            # what an announcing unit is quoted with: the next unit, if it holds code or says
            # something in words (a "Filename: src/main.rs" tag after "as follows:" does not, nor
            # does a template include)
            following = units[j + 1] if j + 1 < len(units) else None
            if following is not None:
                shown = hit.text[following.start:following.end]
                if not (says_something(shown) if following.code else quotable(shown)):
                    following = None
            heads = terms[j + 1] if j + 1 < len(units) else None
            opens = opens_block(hit.text, unit)
            if opens and following is not None and not one_block(hit.text, units, j):
                following = None  # the block ends (or the chunk cuts it) right after its head
            example = (block_after(hit.text, units, j + 1)
                       if following is not None and (announces(text) or heads is not None or opens) else ())
            previous = sentence_before(hit.text, units, j)
            out.append(_Candidate(i, unit, text, hit.heading, following, example,
                                  terms[j], previous,
                                  previous_term=None if previous is None else terms[j - 1],
                                  # a term names what it defines, as does a code section's
                                  # title: it needs no other heading
                                  title=None if heads is not None or defined[j] is not None
                                  else title_of(hit.text, units, j),
                                  binding=binding_of(hit.text, units, j), heads=heads,
                                  statement=statement_of(hit.text, units, j),
                                  defined=None if terms[j] is not None else defined[j],
                                  after_name=_right_after(defined[j], units, j), opens=opens))
    return out


def _right_after(name: Name | None, units: Sequence[Unit], j: int) -> bool:
    """Whether units[j] is the first unit after `name`'s place in the chunk (a section's first
    sentence under its heading): quoted after the name, nothing between them is left out."""
    return (name is not None and name.where is not None
            and (j == 0 or units[j - 1].end <= name.where.start) and name.where.end <= units[j].start)


def _ranks(values: Sequence[float]) -> np.ndarray:
    """0 for the highest value; ties keep their order."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return ranks


def _mean_logprobs(model, context_ids: list[int], continuations: Sequence[list[int]]) -> list[float]:
    scores = shared_context_loglikelihoods(model, context_ids, continuations, batch_size=16)
    return [total / max(len(ids), 1) for (total, _), ids in zip(scores, continuations)]


def score(model, question: str, hits: Sequence) -> tuple[list[_Candidate], dict[str, list[float]], float]:
    """(candidates, {scorer: score per candidate} for each of SCORERS, question log-likelihood
    after an empty passage)."""
    cands = candidates(hits)
    if not cands:
        return [], {}, 0.0
    encode = lambda text: model.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    question_ids = encode(" " + question.strip())[: model.max_length // 2]
    # one pass per unit (and one for an empty passage, the likelihood's baseline) gives the
    # unit's embedding, the question's likelihood after it, and its words' likelihood alone
    reading = read(model, [c.text for c in cands] + [""], encode(UNIT_PROMPT), question_ids, MAX_UNIT_TOKENS)
    null = reading.likelihood[-1]
    scores: dict[str, list[float]] = {"likelihood": reading.likelihood[:-1]}
    scores["embedding"] = list(reading.vectors[:-1] @ model.embed([question])[0])
    units = [encode(" " + c.text)[:MAX_UNIT_TOKENS] or [model.pad_id] for c in cands]
    asked = _mean_logprobs(model, encode(f"Question: {question.strip()}\nAnswer:"), units)
    scores["answer"] = [a - b for a, b in zip(asked, reading.own[:-1])]
    return cands, scores, null


def fuse(scores: dict[str, list[float]], scorers: Sequence[str]) -> np.ndarray:
    """Reciprocal-rank fusion of the chosen scorers' rankings."""
    total = np.zeros(len(next(iter(scores.values()))))
    for name in scorers:
        total += 1.0 / (FUSION_K + _ranks(scores[name]))
    return total


def offer_order(fused: Sequence[float], scores: dict[str, list[float]], scorers: Sequence[str]) -> list[int]:
    """The candidates in the order they are offered to the word budget: the ranking by `fused`
    (`fuse`'s output for `scores`) and each chosen LEADERS scorer's own ranking taking turns
    (round robin), each turn giving its best candidate not yet offered.

    Why: the scorers disagree on which unit answers: none ranks the answering unit first for
    more than about a third of the questions, and their first choices differ (docs/RESULTS.md,
    "Where the answers are lost"). The fusion's first few are the units every scorer ranks fairly
    high; a budget of 3-4 quotes then leaves out a unit that one judge ranks first and another
    ranks low. Offered in turns, each judge's first choice is quoted beside the fusion's."""
    rankings = [list(np.argsort(-np.asarray(fused), kind="stable"))]
    rankings += [list(np.argsort(-np.asarray(scores[name]), kind="stable"))
                 for name in LEADERS if name in scorers and name in scores]
    order: list[int] = []
    offered: set[int] = set()
    nexts = [iter(ranking) for ranking in rankings]
    while len(order) < len(fused):
        for ranking in nexts:
            i = next((int(i) for i in ranking if i not in offered), None)  # its best not yet offered
            if i is not None:
                offered.add(i)
                order.append(i)
    return order


def passed_on(order: Sequence[int], cands: Sequence[_Candidate]) -> list[int]:
    """`order` with each signpost (`whole_thoughts.points_ahead`) that has a candidate after it in
    its chunk replaced by that candidate, or dropped where that one came earlier. A signpost
    ending in ":" keeps its turn: it is quoted with what it announces (`_closing`).

    Why: a sentence that says what comes next ("Listing 4-2 shows an example using an
    integer.", "Next, we'll extract the `hosting` module to its own file.") names the question's
    topic, so the judges rank it high, and it holds nothing the question asks; the sentence after
    it is where the text goes on to say it."""
    out: list[int] = []
    seen: set[int] = set()
    for i in order:
        if i in seen:
            continue
        seen.add(i)
        after = i + 1  # candidates are in chunk order
        if (points_ahead(cands[i].text) and not announces(cands[i].text)
                and after < len(cands) and cands[after].hit == cands[i].hit):
            i = after
            if i in seen:
                continue
            seen.add(i)
        out.append(i)
    return out


def choice_order(cands: Sequence[_Candidate], fused: Sequence[float], scores: dict[str, list[float]],
                 scorers: Sequence[str]) -> list[int]:
    """The order `choose` offers the candidates to the word budget in: `offer_order`'s, with each
    signpost's turn passed on (`passed_on`)."""
    return passed_on(offer_order(fused, scores, scorers), cands)


def select(model, question: str, hits: Sequence, max_words: int = MAX_WORDS) -> Evidence:
    """The best units, taken in `offer_order` while they fit `max_words` (each unit counts one
    word more, for its "[n]"), each with what it needs to stand alone; the first is always kept
    (`score`, then `choose`)."""
    cands, scores, null = score(model, question, hits)
    return choose(hits, cands, scores, null, max_words)


def reading_order(spans: Sequence[Span]) -> list[Span]:
    """The spans as a reader meets them: by their passage's rank, then by place in the passage,
    led by the span whose unit best explains the question (the highest question likelihood; the
    first of ties in `spans`' order).

    Why: units read in their passage's order keep their context, and the likelihood is the scorer
    that most often ranks the answering unit first."""
    ordered = sorted(spans, key=lambda s: (s.hit, s.start))
    if ordered:
        first = max(spans, key=lambda s: s.likelihood)
        ordered = [first] + [s for s in ordered if s is not first]
    return ordered


def _overlaps(spans: Sequence[Span], hit: int, start: int, end: int) -> bool:
    """Whether hits[hit].text[start:end] overlaps a span already chosen (or the term it is quoted
    after)."""
    return any(s.hit == hit and (s.start < end and s.end > start
                                 or s.name is not None and s.name.where is not None
                                 and s.name.where.start < end and s.name.where.end > start)
               for s in spans)


def _named_by(spans: Sequence[Span], hit: int, unit: Unit) -> bool:
    """Whether a span of passage `hit` already chosen is quoted after `unit` as its name."""
    return any(s.hit == hit and s.name is not None and s.name.where == unit for s in spans)


def _quoted_words(text: str, c: _Candidate, first: Unit, last: Unit, start: int, end: int) -> int:
    """The words text[start:end] counts quoted for candidate `c` (from unit `first` to `last`): its
    own, the "[n]", and the dash that sets a term or heading off from what follows it."""
    dash = (first is c.term or first is c.previous_term or first is c.title
            or last is not c.unit and c.heads is not None)
    return word_count(text[start:end]) + 1 + dash


def _name(c: _Candidate, spans: Sequence[Span]) -> Name | None:
    """The name a later sentence of a definition's body, or a sentence of a section headed by the
    code it describes, is quoted after (`defined_by`), unless a span already quoted it."""
    name = c.defined
    if name is not None and name.where is not None and _overlaps(spans, c.hit, name.where.start, name.where.end):
        return None
    return name


def _opening(text: str, c: _Candidate, spans: Sequence[Span], room: int) -> tuple[int, Unit] | None:
    """Where `c`'s quote opens in its chunk's `text`, and its first unit: at the unit itself, or at
    what it needs before it; None where that does not fit `room` (the words left) and the unit is
    not quoted without it. The first quote (no `spans` yet) may overrun the room where alone it
    would read as a fragment."""
    first_quote = not spans

    def words_from(unit: Unit) -> int:
        return word_count(text[unit.start:c.unit.end])

    def free(start: int, end: int) -> bool:
        return not _overlaps(spans, c.hit, start, end)

    # a definition's first sentence is quoted with the term it defines (and the dash that sets the
    # term off); where the two do not fit, it is not quoted: alone it never says what it is about
    # ("Return the argument with ~ replaced ...")
    if c.term is not None and free(c.term.start, c.term.end):
        return (c.term.start, c.term) if words_from(c.term) + 2 <= room or first_quote else None
    # a sentence that opens a section and leaves its subject to the heading is quoted after the
    # heading, when that fits (even a first quote only then: alone, it still says something)
    if c.title is not None and words_from(c.title) + 2 <= room:
        return c.title.start, c.title
    # a unit that points back is quoted with the sentence it points to, when that fits; where that
    # sentence opens a definition, with the term too (the rule above: "These messages will not
    # ..." after "Detailed informational messages ..." is about `DEBUG`)
    if c.previous is not None and points_back(c.text) and free(c.previous.start, c.previous.end):
        term = c.previous_term if c.previous_term is not None and free(c.previous_term.start,
                                                                       c.previous_term.end) else None
        opening = term or c.previous
        if words_from(opening) + 1 + (term is not None) <= room or first_quote:
            return opening.start, opening
    # a code line inside a bracket an earlier line opens is quoted from that line where it fits,
    # and not at all where it does not: alone it is a statement's tail
    if c.statement is not None and free(c.statement.start, c.unit.start):
        return (c.statement.start, c.statement) if words_from(c.statement) + 1 <= room else None
    # a code line that opens with a name is quoted from the line that binds it, when that fits
    if (c.binding is not None and free(c.binding.start, c.unit.start)
            and (words_from(c.binding) + 1 <= room or first_quote)):
        return c.binding.start, c.binding
    return c.unit.start, c.unit


def _closing(text: str, c: _Candidate, spans: Sequence[Span], room: int, start: int, first: Unit,
             name_words: int) -> tuple[int, int, Unit]:
    """(start, end, last unit) of `c`'s quote opening at `start`: a unit that announces what
    follows is quoted with it (the code line or sentence it introduces), and a term with the first
    sentence of the definition it heads, when that fits; a term comes with its other names before
    it ("-d" above "--delete") where they fit too, which moves the start."""
    alone = start, c.unit.end, c.unit
    if not ((announces(c.text) or c.opens or c.heads is not None) and c.following is not None
            and not _overlaps(spans, c.hit, c.following.start, c.following.end)):
        return alone
    named = (c.heads.start if c.heads is not None and start == c.unit.start
             and not _overlaps(spans, c.hit, c.heads.start, c.unit.start) else start)
    begin = next((b for b in dict.fromkeys((named, start))
                  if word_count(text[b:c.following.end]) + 1 + (c.heads is not None) <= room or not spans), None)
    if begin is None:
        return alone
    end, last = c.following.end, c.following
    # an announced code block comes with as many of its further lines as fit: "For example:" is
    # followed by the example, not by its first line
    for line in c.example:
        if (_overlaps(spans, c.hit, line.start, line.end)
                or _quoted_words(text, c, first, line, begin, line.end) + name_words > room):
            break
        end, last = line.end, line
    return begin, end, last


def on_topic(cands: Sequence[_Candidate], scores: dict[str, list[float]]) -> set[int]:
    """The passages (hit numbers) with a unit about what the question asks: its "embedding" score
    (cosine to the question) at least OFF_TOPIC_BELOW. Every passage when none has one (the answer
    then abstains, and still shows its closest quote) or when there is no "embedding" score
    (nothing says what is off the question)."""
    every = {c.hit for c in cands}
    if "embedding" not in scores:
        return every
    about = {c.hit for c, similarity in zip(cands, scores["embedding"]) if similarity >= OFF_TOPIC_BELOW}
    return about or every


def _taken(hits: Sequence, cands: Sequence[_Candidate], scores: dict[str, list[float]], fused: np.ndarray,
           order: Sequence[int], quotable_passages: set[int], max_words: int,
           first_cap: int | None) -> list[Span]:
    """The spans `choose` takes, offering the candidates in `order`: each with what it needs to
    stand alone, while it fits `max_words`. The first may run past the budget (alone its unit
    would read as a fragment), up to `first_cap` words (None: any length)."""
    spans: list[Span] = []
    words = 0
    for i in order:
        c, text, room = cands[i], hits[cands[i].hit].text, max_words - words
        if c.hit not in quotable_passages or _overlaps(spans, c.hit, c.unit.start, c.unit.end):
            continue
        name = _name(c, spans)
        name_words = word_count(name.text) + 1 if name else 0
        # where the name and the unit do not fit, the unit is not quoted (a first quote always
        # comes with its name)
        if name and name_words + word_count(c.text) + 1 > room and spans:
            continue
        after_name = c.after_name
        opening = _opening(text, c, spans, room)
        if opening is None:
            continue
        start, first = opening
        if first is c.previous_term:  # the quote opens with the term it would be named by
            name, name_words = None, 0
        elif first is c.unit and c.term is not None and _named_by(spans, c.hit, c.term):
            # a definition's first sentence whose term names a quote already taken (one of its
            # later sentences): named by it too, so that the reader, who meets this sentence
            # first, learns what it defines
            name, after_name = Name(text[c.term.start:c.term.end], c.term), True
            name_words = word_count(name.text) + 1
        start, end, last = _closing(text, c, spans, room, start, first, name_words)
        if c.opens and last is c.unit and spans:
            continue  # a block's head without its lines says nothing; a first quote keeps it
        n = _quoted_words(text, c, first, last, start, end) + name_words
        if n > room and (spans or first_cap is not None and n > first_cap):
            continue
        spans.append(Span(c.hit, start, end, text[start:end], float(fused[i]), scores["likelihood"][i],
                          cut_before=first.cut_before, cut_after=last.cut_after, code=first.code,
                          name=name, after_name=name is not None and after_name))
        words += n
        if words >= max_words:
            break
    return spans


def choose(hits: Sequence, cands: Sequence[_Candidate], scores: dict[str, list[float]], null: float,
           max_words: int = MAX_WORDS, scorers: Sequence[str] = SCORERS) -> Evidence:
    """`select`'s choice from units already scored (`score`'s output): each unit of a passage
    `on_topic` in `offer_order`, with what it needs to stand alone (`_name`, `_opening`,
    `_closing`), while it fits; the first quote may run past `max_words` by FIRST_QUOTE_OVERRUN,
    and further only where no candidate's quote fits so (`_taken`). The scores it reports
    (relevance, answer gain, similarity, each passage's likelihood) are over every unit, so
    abstention reads all of them."""
    if not cands:
        return Evidence([], float("-inf"), passage_likelihood=(float("-inf"),) * len(hits))
    fused = fuse(scores, scorers)
    quotable_passages = on_topic(cands, scores)
    order = choice_order(cands, fused, scores, scorers)
    spans = (_taken(hits, cands, scores, fused, order, quotable_passages, max_words, max_words + FIRST_QUOTE_OVERRUN)
             or _taken(hits, cands, scores, fused, order, quotable_passages, max_words, None))
    best_likelihood = max(scores["likelihood"])
    answer_gain = max(scores["answer"]) if "answer" in scores else None
    similarity = float(max(scores["embedding"])) if "embedding" in scores else None
    per_passage = [float("-inf")] * len(hits)
    for c, likelihood in zip(cands, scores["likelihood"]):
        per_passage[c.hit] = max(per_passage[c.hit], likelihood)
    return Evidence(spans, best_likelihood - null, answer_gain, tuple(per_passage), similarity)
