"""One clause of a person's correction, rewritten as a command — or recognised as none.

The clause-level half of the heuristic writer's rules (``writer/correction.py`` reads whole
lines). Three pure steps, no model:

* :func:`strip_lead_ins` removes what is only conversation at the start of a sentence
  (``no,``, ``wrong``, ``I already told you:``, ``please``, ``actually``, ``stop —``,
  ``don't do that,``, ``how many times do I have to say it,``…) and trailing filler
  (``please``, ``thanks``, ``though``, ``again``).
* :func:`to_imperative` rewrites the plain grammatical shapes of a rule to the imperative:
  ``we always use X`` → ``always use X``; ``you should never X`` → ``never X``; ``let's not
  X`` → ``don't X``; ``I said not to X`` → ``don't X``; ``this repo uses X`` → ``use X``;
  ``X never go in Y`` → ``never put X in Y``; ``the cache must be invalidated on write`` →
  ``invalidate the cache on write``; ``the tests must not touch X`` → ``don't let the tests
  touch X``; ``no mocks in Y`` → ``avoid mocks in Y``; ``when you X`` → ``when Xing``.
  Anything else is left as it was.
* :func:`is_imperative` says whether a clause now opens as a command: a base-form verb not
  followed by a finite verb ("Build is slow" is no command), or Never/Always/Don't/Only and a
  verb a person would direct ("Don't worry" is no rule), or Avoid/Prefer.

:func:`make_title` cuts a rule's first command to a title at a clause or word boundary.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


TITLE_MAX_CHARS = 80

#: Base-form verbs a kept rule may open with. Broad on purpose: the other checks (person,
#: question, deixis, a finite verb after the first word) reject conversation; this only
#: tells a verb from a noun at the start of a clause.
VERBS = _words(
    """
    accept activate add adjust align allow annotate append apply archive ask assert assign
    audit avoid await back batch benchmark bind block bound branch break bubble build bump
    cache call cap capture catch change check choose clean clear clone close collect combine
    commit compare compile compress configure confirm consider convert copy create cut debounce
    declare decode default defer define delete deploy deprecate describe destroy detach
    disable document double download drain drop dump edit emit enable encode encrypt end
    enforce ensure escape evict exclude execute exit expect explain export expose extend
    extract fail fall fetch filter fix flag flush follow force fork format freeze gate
    generate give group guard handle hash hide hold ignore import include increase index
    initialise initialize inject inline insert inspect install invalidate isolate keep kill
    label launch leave let limit link lint list load lock log look lower make map mark match
    measure merge migrate minimise minimize mock monitor mount move name normalise normalize
    note notify open order override pack page paginate parse pass paste patch pause persist
    pick pin place poll port prefer prefix preload prepare preserve print profile promote
    protect provide prune publish pull push put query queue quote raise rate read rebase
    rebuild recompute record redact reduce refactor refresh register reject release reload
    remove rename render reorder repeat replace report request require rerun reset resize
    resolve restart restore retry return reuse revert review rewrite roll rotate round run
    sanitise sanitize save scan schedule scope search seed select send separate serialise
    serialize set shard share ship show shut sign simplify skip sleep slice sort specify split
    squash stage start stash stick stop store stream strip stub submit subscribe swap switch
    sync tag take tail target test throttle time trace track treat trigger trim truncate try
    turn type unpin unset unwrap update upgrade upload use validate vendor verify version wait
    warn watch wrap write yield
    """
)
#: Verbs a person says after "don't"/"never" without directing anything ("don't worry").
_NOT_DIRECTIVE = _words(
    "know think see understand worry mind care really get seem recall remember want like "
    "agree believe expect panic bother apologise apologize wrong no not because since so and "
    "or but if when said told did was were had"
)
#: Words no kept rule contains once its lead-ins are gone.
_FILLER = re.compile(r"\b(?:please|pls|thanks|thank you|lol|wtf|ugh|omg)\b", re.IGNORECASE)
_RULE_OPENERS = _words("never always don't only dont")
_NOT_OBJECT = _words(
    "i me my mine you your yours we us our it its this that these those they them he she the "
    "a an is are was were be been again ever mind"
)
#: Objects that point at the thing at hand ("revert that"): a rule needs its own noun.
_DEICTIC = _words("it that this them those these everything anything something")
#: A word after a clause's first word that shows the first word is a subject, not a verb.
_FINITE = _words(
    "is are was were has had does did will would can could should must seems looks fails "
    "failed passes passed broke breaks works worked 's 're isn't aren't wasn't doesn't "
    "didn't won't can't"
)
#: First/second person: a clause still speaking to or for someone is conversation.
PERSON = re.compile(
    r"(?<![\w/.-])(?:i|i'm|i've|i'd|i'll|me|my|mine|you|you're|you've|you'll|you'd|yours|"
    r"yourself|u|ur)(?![\w/'-])",
    re.IGNORECASE,
)

_SEP = r"(?:\s*[,.!:;\u2014\u2013]+\s*|\s+-+\s+|\s+)"
_PUNCT_AHEAD = r"(?=\s*[,.!:;\u2014\u2013-])"
# Lead-ins that are only ever conversation, removed wherever a sentence starts with them.
_LEAD = re.compile(
    r"^(?:"
    r"(?:no+|nope|nah|wrong|incorrect)"
    + _PUNCT_AHEAD
    + r"|(?:ugh+|argh+|hmm+|oh|ok(?:ay)?|fine|hey|man|dude|sorry|seriously|honestly|actually"
    r"|basically|yes|yeah|yep|wtf|omg|damn|sigh|jeez|geez|again|please|pls|plz|just|also"
    r"|and|but|so|then|now|instead|really)\b"
    # Words that are also verbs ("look at the logs") lead in only before punctuation.
    r"|(?:well|look|listen|wait|right|come\s+on|hold\s+on|hang\s+on)"
    + _PUNCT_AHEAD
    + r"|i(?:'ve)?\s+(?:already\s+|just\s+|literally\s+|clearly\s+)?(?:told|said|asked|mentioned)"
    r"(?:\s+(?:you|this|that|it))?(?:\s+(?:before|already|earlier|twice|again))?(?:\s+that)?"
    r"(?=\s*[,.!:;\u2014\u2013-]|\s+(?:we|you|never|always|don'?t|do\s+not|use|not\s+to)\b)"
    r"|as\s+i\s+(?:said|told\s+you|mentioned|asked)(?:\s+(?:before|earlier|already))?"
    r"|like\s+i\s+said(?:\s+before)?"
    r"|how\s+many\s+times\s+(?:do\s+i\s+have\s+to|must\s+i|have\s+i|did\s+i)\s+"
    r"(?:tell|told|say|said)(?:\s+(?:you|it|this|that))?(?:\s+(?:this|that|it))?"
    r"|for\s+the\s+(?:last|hundredth|nth|\w+th)\s+time"
    r"|(?:that'?s|this\s+is|it'?s|you'?re|that\s+was|this\s+was|you\s+are)(?:\s+still|\s+just|"
    r"\s+all|\s+completely|\s+totally)?\s+(?:wrong|incorrect|not\s+(?:right|correct|it|"
    r"how\s+(?:we|you|i)\s+do\s+(?:it|this|that|things)(?:\s+here)?|what\s+i\s+"
    r"(?:asked|wanted|meant|said)(?:\s+for)?))"
    r"|not\s+like\s+that|not\s+(?:this|that)\s+(?:way|one)|not\s+again"
    r"|(?:please\s+)?(?:don'?t|do\s+not)\s+do\s+(?:that|this|it)(?:\s+again)?"
    r"|stop(?:\s+(?:doing\s+)?(?:that|it|this))?"
    + _PUNCT_AHEAD
    + r"|you\s+(?:did|got)\s+it\s+wrong|you\s+broke\s+it"
    r"|(?:keep\s+in\s+mind|remember|note|fyi|reminder|important)(?:\s+that)?(?=\s*[,:\u2014-]|\s+that)"
    r"|(?:the|our|my)\s+(?:rule|convention)\s+(?:is|here\s+is)(?=\s*[:,])"
    r"|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|next\s+time"
    r"|in\s+this\s+(?:repo(?:sitory)?|project|codebase|team|code\s*base)(?=\s*,|\s+(?:we|you)\b)"
    r"|here(?=\s*,)"
    r")" + _SEP,
    re.IGNORECASE,
)
# "no" without punctuation is a lead-in only before a verb, a rule word or a pronoun.
_LEAD_NO = re.compile(r"^(?:no+|nope|nah)\s+(?=(\S+))", re.IGNORECASE)
_TRAILING_FILLER = re.compile(
    r"(?:[,\s]+(?:please|pls|thanks|thank you|though|ok|okay|right|lol|again|man|dude|"
    r"for now|for me))+\s*[.!?]*$",
    re.IGNORECASE,
)

_SHOULD = r"(?:should|must|need\s+to|have\s+to|ought\s+to|gotta)"
_SHOULD_NOT = (
    r"(?:shouldn'?t|should\s+not|mustn'?t|must\s+not|can'?t|cannot|can\s+not|don'?t|do\s+not)"
)
# (pattern, replacement) rewrites to the imperative, each tried once, in this order.
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (
            r"^(?:the|our)\s+(?:rule|convention)\s+(?:is|here\s+is)\s*:?\s*(?:that\s+)?no\s+",
            "avoid ",
        ),
        (r"^(?:the|our)\s+(?:rule|convention)\s+(?:is|here\s+is)\s*:?\s*(?:that\s+)?", ""),
        (r"^(?:rule|convention)\s*:\s*", ""),
        (
            r"^the\s+(?:correct|right|proper|best|only|safe)\s+way(?:\s+to\s+[^,;]+?)?\s+is\s+to\s+",
            "",
        ),
        (r"^the\s+(?:fix|solution|workaround|trick|answer)\s+(?:was|is)\s+to\s+", ""),
        (r"^(?:make\s+sure|ensure)\s+(?:to|you)\s+", ""),
        (r"^(?:remember|don'?t\s+forget)\s+to\s+", ""),
        (r"^(?:remember|keep\s+in\s+mind)\s+that\s+", ""),
        (r"^i\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\s+", ""),
        (r"^i\s+(?:prefer|always\s+prefer|like\s+to\s+use)\s+", "prefer "),
        (r"^not\s+to\s+", "don't "),
        (rf"^(?:you|we)\s+{_SHOULD}\s+not\s+", "don't "),
        (rf"^(?:you|we)\s+{_SHOULD}\s+never\s+", "never "),
        (rf"^(?:you|we)\s+{_SHOULD}\s+always\s+", "always "),
        (rf"^(?:you|we)\s+{_SHOULD}\s+", ""),
        (rf"^(?:you|we)\s+{_SHOULD_NOT}\s+(?:ever\s+)?", "don't "),
        (r"^(?:you|we)\s+(always|never|only)\s+", r"\1 "),
        (r"^let'?s\s+not\s+", "don't "),
        (r"^let'?s\s+(?:always\s+)?", ""),
        (r"^(?:please\s+)?(?:don'?t|do\s+not)\s+ever\s+", "never "),
        (r"^never\s+ever\s+", "never "),
        (r"^dont\s+", "don't "),
        (
            r"^(?:this|the|our)\s+(?:repo(?:sitory)?|project|codebase|team|code\s*base|app|"
            r"service|monorepo)\s+(?:uses|is\s+using|prefers|runs)\s+",
            "use ",
        ),
        (r"^we(?:'re|\s+are)\s+using\s+", "use "),
    )
)
_WE_VERB = re.compile(r"^we\s+(\w+)\b", re.IGNORECASE)
_SUBJECT = r"(?P<subj>(?:the|all|every|each|these|those|our|any|new)\s+[^,;]{1,60}?)"
# "the cache must be invalidated on write" -> "invalidate the cache on write"
_PASSIVE = re.compile(
    _SUBJECT + r"\s+(?:must|should|has\s+to|have\s+to|needs?\s+to)\s+(?P<adv>always\s+|never\s+|"
    r"not\s+)?be\s+(?P<pp>[a-z]+)\b(?P<rest>.*)$",
    re.IGNORECASE,
)
# "the tests must not depend on the clock" -> "don't let the tests depend on the clock"
_MUST_NOT = re.compile(
    _SUBJECT + r"\s+(?:must\s+not|mustn'?t|should\s+not|shouldn'?t|may\s+not|should\s+never|"
    r"must\s+never)\s+(?P<verb>[a-z]+)\b(?P<rest>.*)$",
    re.IGNORECASE,
)
# "secrets never go in the repo" -> "never put secrets in the repo"
_PUT_IN = re.compile(
    r"^(?P<what>(?!(?:it|this|that|they|these|those|we|you|i)\b)[^,;]{2,60}?)\s+"
    r"(?P<neg>never\s+|don'?t\s+|do\s+not\s+|should\s+not\s+|shouldn'?t\s+|must\s+not\s+)?"
    r"(?:go|goes|live|lives|belong|belongs)\s+(?P<prep>in|into|under|inside)\s+(?P<where>.+)$",
    re.IGNORECASE,
)
# "no mocks in integration tests" -> "avoid mocks in integration tests"
_NO_NOUN = re.compile(r"^no\s+(?!more\b|idea\b|need\b|way\b|problem\b|worries\b|clue\b)(?=\w)")
_WHEN_YOU = re.compile(r"\b(when|whenever|before|after|while)\s+you\s+([a-z]+)\b", re.IGNORECASE)
_DETERMINERS = _words("the a an all every each these those our any new")
_DOUBLE_FINAL = _words(
    "run set put get stop commit drop ship skip plan swap wrap cut let begin submit admit "
    "forget tag log pin map dig plug"
)
_IRREGULAR_PARTICIPLES = {
    "set": "set",
    "put": "put",
    "kept": "keep",
    "run": "run",
    "built": "build",
    "cut": "cut",
    "shut": "shut",
    "written": "write",
    "hidden": "hide",
    "taken": "take",
    "given": "give",
    "frozen": "freeze",
    "thrown": "throw",
}
#: Where a long title may end: a clause boundary first, a phrase boundary if there is none.
_STRONG_BOUNDARY = re.compile(
    r",\s|\s(?:because|since|so|and|or|but|when|unless|until|before|after|if|while|otherwise)\s"
)
_WEAK_BOUNDARY = re.compile(r"\s(?:instead of|rather than|with|for|in|on|from|to|by|via|at)\s")
_DANGLING = _words(
    "the a an to and or of with for from in on at by as that which but if when then than into "
    "onto via per not no your my our its their this these those"
)


def strip_lead_ins(text: str) -> str:
    """``text`` without its conversational lead-ins and trailing filler.

    Args:
        text: One sentence (or clause) of a person's turn.

    Returns:
        What is left, whitespace-collapsed, typographic apostrophes made plain; empty when
        the sentence was only conversation ("No, that's wrong.").
    """
    text = " ".join(text.replace("\u2019", "'").split())
    for _ in range(12):
        before = text
        text = _LEAD.sub("", text, count=1).lstrip(" ,.!:;-\u2014\u2013")
        m = _LEAD_NO.match(text)
        if m and _opens_clause(m.group(1)):
            text = text[m.end() :]
        if text == before:
            break
    return _TRAILING_FILLER.sub("", text).strip(" ,;:-\u2014\u2013")


def _opens_clause(word: str) -> bool:
    w = word.lower().strip("`'\",")
    return w in VERBS or w in _NOT_OBJECT or w in _RULE_OPENERS or w in ("not", "do")


def _gerund(verb: str) -> str:
    v = verb.lower()
    if v in _DOUBLE_FINAL:
        return v + v[-1] + "ing"
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")):
        return v[:-1] + "ing"
    return v + "ing"


def _base(participle: str) -> str:
    """The base form of a past participle when it is one of :data:`VERBS`, else ``""``."""
    p = participle.lower()
    if p in _IRREGULAR_PARTICIPLES:
        return _IRREGULAR_PARTICIPLES[p]
    for candidate in (p[:-1], p[:-2], p[:-3] if p[-3:-2] == p[-4:-3] else "", p[:-3] + "y"):
        if p.endswith("ed") and candidate in VERBS:
            return candidate
    return ""


def _subject(text: str) -> str:
    first, _, rest = text.partition(" ")
    return f"{first.lower()} {rest}" if first.lower() in _DETERMINERS else text


def to_imperative(clause: str) -> str:
    """``clause`` rewritten to the imperative where its grammar is plain, else as it was.

    Args:
        clause: One clause, lead-ins already stripped.

    Returns:
        The rewritten clause; its first letter's case is kept as written.
    """
    text = clause.strip()
    text = _WHEN_YOU.sub(lambda m: f"{m.group(1)} {_gerund(m.group(2))}", text)
    text = re.sub(r"(?<!\byou )\byour\b", "the", text, flags=re.IGNORECASE)
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text, count=1)
    m = _WE_VERB.match(text)
    if m and m.group(1).lower() in VERBS:
        return text[m.start(1) :]
    if is_imperative(text):
        return text
    m = _PASSIVE.match(text)
    if m and _base(m.group("pp")):
        adv = {"always": "always ", "never": "never ", "not": "don't "}.get(
            m.group("adv").strip().lower() if m.group("adv") else "", ""
        )
        return f"{adv}{_base(m.group('pp'))} {_subject(m.group('subj'))}{m.group('rest')}"
    m = _MUST_NOT.match(text)
    if m and m.group("verb").lower() not in _FINITE | {"be", "have"}:
        return f"don't let {_subject(m.group('subj'))} {m.group('verb')}{m.group('rest')}"
    m = _PUT_IN.match(text)
    if m:
        what, where = _subject(m.group("what").strip()), m.group("where").strip()
        return f"{'never ' if m.group('neg') else ''}put {what} {m.group('prep')} {where}"
    if _NO_NOUN.match(text.lower()) and not any(w in _FINITE for w in text.lower().split()):
        return "avoid " + text[3:]
    return text


def is_imperative(clause: str, *, strict: bool = False) -> bool:
    """Whether ``clause`` opens as a command.

    Args:
        clause: A clause, after :func:`to_imperative`.
        strict: Require a known verb after Never/Always/Don't/Only too (used for a comma
            segment, where "never requests" is a contrast, not a new command).

    Returns:
        True for a base-form verb not followed by a finite verb, Never/Always/Don't/Only and
        a directed verb, or Avoid/Prefer and an object.
    """
    words = clause.replace("\u2019", "'").split()
    if not words or _FILLER.search(clause) or not _balanced(clause):
        return False
    first = words[0].lower().strip("`*_\"'")
    rest = [w.lower().strip("`*_,.\"'") for w in words[1:]]
    if first == "do" and rest[:1] == ["not"]:
        first, rest = "don't", rest[1:]
    if first in _RULE_OPENERS:
        if not rest or rest[0] in _NOT_OBJECT | _NOT_DIRECTIVE | _RULE_OPENERS:
            return False
        return rest[0] in VERBS or not strict
    if first in ("avoid", "prefer"):
        return bool(rest)
    return first in VERBS and bool(rest) and rest[0] not in _FINITE | _RULE_OPENERS


def _balanced(text: str) -> bool:
    return (
        text.count("(") == text.count(")")
        and text.count("[") == text.count("]")
        and text.count("`") % 2 == 0
    )


def points_at_the_thing_at_hand(clause: str) -> bool:
    """A short command about what is on screen ("revert that last change"): not a rule.

    Args:
        clause: An imperative clause.

    Returns:
        True when, after its rule word, it has at most five words and its object is
        ``it``/``that``/``this``/``them``….
    """
    words = [w.lower().strip("`,.") for w in clause.split()]
    while words and words[0] in ("never", "always", "don't", "do", "not", "only"):
        words = words[1:]
    return 2 <= len(words) <= 5 and words[1] in _DEICTIC


def make_title(clause: str) -> str:
    """A title from a rule's first command: ≤ ``TITLE_MAX_CHARS``, ended at a boundary.

    Args:
        clause: The command (any case, any trailing punctuation).

    Returns:
        The title, capitalised, without final punctuation, never ending on a dangling word
        ("the", "to", "and"…), an open bracket or backtick, or an ellipsis.
    """
    text = " ".join(clause.split()).rstrip(" ,;:.!")
    text = text[:1].upper() + text[1:]
    if len(text) > TITLE_MAX_CHARS:
        head = text[: TITLE_MAX_CHARS + 1]
        for boundary in (_STRONG_BOUNDARY, _WEAK_BOUNDARY):
            cuts = [
                m.start() for m in boundary.finditer(head) if len(head[: m.start()].split()) >= 3
            ]
            if cuts:
                text = head[: cuts[-1]]
                break
        else:
            text = head[: head.rfind(" ")] if " " in head else head
    words = text.split()
    while words and (
        words[-1].lower().strip(",;:") in _DANGLING
        or " ".join(words).count("(") != " ".join(words).count(")")
        or " ".join(words).count("[") != " ".join(words).count("]")
        or " ".join(words).count("`") % 2
        or words[-1].endswith(("\u2026", "..."))
    ):
        words = words[:-1]
    return " ".join(words).rstrip(" ,;:.!\u2014\u2013-")
