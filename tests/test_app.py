"""The Gradio app on the tiny model: handlers as plain functions, a real server driven through
gradio_client on loopback, and a person's path through the page in headless Chromium (Selenium
with Debian's /usr/bin/chromium and /usr/bin/chromedriver; nothing is downloaded)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from net import free_port

from unirag.app import (DEMO_COLLECTION, EMPTY_COLLECTION, MAX_QUEUE, NO_SOURCES, build_app, launch, new_session,
                        parse_auth, render_sources, safe_filename)
from unirag.errors import UniragError
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.search import Hit

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SMALL = dict(top_k=2, max_new_tokens=8, chunk_settings=ChunkSettings(chunk_size=96, overlap=8))
# One short section, so the only chunk holds all of it (and fits the tiny model's 256-token window
# whole): markup that must show as text, not HTML.
DOC = "# Zorblax\n\nA zorblax <b>sings</b> & <iframe src=x> in Quendor.\n"
QUESTION = "Where does the zorblax live?"


def write_doc(folder: Path, name: str = "zorblax.md", text: str = DOC) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture
def demo(tiny, tmp_path):
    return build_app(tiny, db=tmp_path / "db", upload_dir=tmp_path / "uploads", **SMALL)



# ---------------------------------------------------------------------- handlers, no server
def test_empty_collection_gives_a_clear_message(demo):
    outputs = list(demo.unirag.respond(QUESTION, None, "docs"))
    chat, session, sources, box = outputs[-1]
    assert chat[-1]["role"] == "assistant"
    assert "is empty" in chat[-1]["content"] and "Upload documents" in chat[-1]["content"]
    assert chat[-1]["content"] == EMPTY_COLLECTION.format(name="docs", exts=".adoc .asciidoc .htm .html .ipynb .markdown .md .mdx .pdf .rst .txt")
    assert session["turns"] == [] and sources == NO_SOURCES and box == ""
    assert "is empty" in demo.unirag.collection_status("docs")
    assert "is empty" in list(demo.unirag.respond(QUESTION, None, "never-made"))[-1][0][-1]["content"]
    assert "bad collection name" in list(demo.unirag.respond(QUESTION, None, "../x"))[-1][0][-1]["content"]


def test_upload_then_answer_streams_with_sources(tiny, tmp_path):
    # quotes first, then a generated sentence: both parts stream into the chat
    rag = build_app(tiny, db=tmp_path / "db", upload_dir=tmp_path / "uploads", answer="both", **SMALL).unirag
    rag.ask_settings = replace(rag.ask_settings, abstain=False)  # the tiny model's scores are noise
    seen = []
    lines = rag.add_files([str(write_doc(tmp_path / "in"))], "docs", progress=lambda f, desc: seen.append(f))
    assert lines == ["`zorblax.md`: **added** (1 chunk)"] and seen[-1] == 1.0
    assert (tmp_path / "uploads" / "docs" / "zorblax.md").read_text() == DOC
    assert "1 chunk" in rag.collection_status("docs")
    assert rag.add_files([str(tmp_path / "in" / "zorblax.md")], "docs") == [
        "`zorblax.md`: **already indexed**, unchanged"]

    start = new_session()
    outputs = list(rag.respond(QUESTION, start, "docs"))
    assert len(outputs) >= 3  # sources first, then the answer piece by piece
    assert outputs[0][2] == '<p class="unirag-source-label"><em>reading</em> zorblax.md &gt; Zorblax</p>'  # at retrieval
    chat, session, sources, box = outputs[-1]
    answer = chat[-1]["content"]
    assert chat[0] == {"role": "user", "content": QUESTION} and chat[-1]["role"] == "assistant" and answer
    partial = [o[0][-1]["content"] for o in outputs[1:-1]]
    assert all(answer.startswith(p) for p in partial) and len(set(partial)) > 1  # it streamed
    assert "[1] zorblax.md &gt; Zorblax" in sources
    # the quoted evidence is highlighted in its chunk, the chunk's markup escaped, never rendered
    assert ('# Zorblax&#10;&#10;<mark class="unirag-evidence">A zorblax &lt;b&gt;sings&lt;/b&gt; &amp; '
            '&lt;iframe src=x&gt; in Quendor.</mark></pre>') in sources
    # the chat shows the quote's markup as text (escaped for its Markdown; an inline tag such as
    # <b> is left out of a quote's prose, `sentences.plain`); the turn keeps the quote as quoted
    assert answer.startswith("“A zorblax sings &amp; &lt;iframe src=x&gt; in Quendor.” [1]")
    assert session["turns"][0][1].startswith("“A zorblax sings & <iframe src=x> in Quendor.” [1]")
    assert "<b>" not in sources and "<iframe" not in sources
    assert len(session["turns"]) == 1 and session["turns"][0][0] == QUESTION and box == ""
    assert start == new_session()  # the session passed in is never mutated

    follow = list(rag.respond("And what does it sing?", session, "docs"))[-1]
    assert [m["role"] for m in follow[0]] == ["user", "assistant", "user", "assistant"]
    assert len(follow[1]["turns"]) == 2 and len(session["turns"]) == 1


def test_upload_limits_and_names(tiny, tmp_path):
    demo = build_app(tiny, db=tmp_path / "db", upload_dir=tmp_path / "uploads", max_upload_mb=0.001,
                     max_upload_files=3, **SMALL)
    rag, src = demo.unirag, tmp_path / "in"
    big = write_doc(src, "big.md", "# Big\n\n" + "word " * 400)  # 2 KB > 1 KB limit
    exe = write_doc(src, "tool.exe", "MZ")
    ok = write_doc(src, "ok.md", "# Ok\n\nA small note.\n")
    lines = rag.add_files([str(big), str(exe), ("../../../outside.md", ok), ("..", ok), (".hidden.md", ok)],
                          "docs")
    assert lines[0] == "**Refused:** too many files: 5 in one upload; the limit is 3. Nothing was added."
    lines = rag.add_files([str(big), str(exe), ("..", ok)], "docs")
    assert lines[0] == "`big.md`: **refused**, too large (2.0 KB; the limit is 1.0 KB)"
    assert "`tool.exe`: **refused**, `.exe` is not an accepted type" in lines[1]
    assert lines[2] == "**Refused:** `..` is not a usable file name"
    assert rag.collection_status("docs").startswith("The collection `docs` is empty")
    lines = rag.add_files([("../../../outside.md", ok), ("a\\..\\..\\win.md", ok)], "docs")
    assert lines == ["`outside.md`: **added** (1 chunk)", "`win.md`: **added** (1 chunk)"]
    saved = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")
                   if p.relative_to(tmp_path).parts[0] != "in")
    assert saved == ["uploads/docs/outside.md", "uploads/docs/win.md"]  # nothing escaped the folder
    assert rag.add_files([str(ok)], "bad/name")[0].startswith("**Error:** bad collection name")

    assert safe_filename("../../etc/x.md") == "x.md" and safe_filename("my <notes>.md") == "my _notes_.md"
    for bad in ("..", ".", "", "a/..", "..\\", ".env", "x\x00.md"):
        with pytest.raises(UniragError):
            safe_filename(bad)


def test_sources_are_escaped_and_auth_is_parsed():
    hit = Hit("id", 0.5, "line <script>alert(1)</script>\n\n# not a heading *x*", "a<b>.md", "H & I")
    html = render_sources([hit])
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&lt;b&gt;.md &gt; H &amp; I" in html
    assert "\n\n#" not in html  # the chunk's newlines are entities: no Markdown is parsed inside it
    assert parse_auth("ann:s3:cret") == ("ann", "s3:cret") and parse_auth(None) is None
    for bad in ("nocolon", ":pw", "user:"):
        with pytest.raises(UniragError):
            parse_auth(bad)


def test_app_command_options_and_auth_check():
    import typer
    from typer.testing import CliRunner

    from unirag.app import app_command

    cli = typer.Typer()
    cli.command("app")(app_command)
    cli.command("other")(lambda: None)  # two commands, so "app" is a subcommand as in unirag.cli.commands
    runner = CliRunner()
    help_text = runner.invoke(cli, ["app", "--help"]).output
    for option in ("--model", "--adapter", "--db", "--chroma-url", "--collection", "--host", "--port", "--share",
                   "--auth", "--top-k", "127.0.0.1"):
        assert option in help_text
    # a malformed login fails at once, before any model is loaded (flag or UNIRAG_APP_AUTH)
    assert "USER:PASSWORD" in str(runner.invoke(cli, ["app", "--auth", "nopassword"]).exception)
    assert "USER:PASSWORD" in str(runner.invoke(cli, ["app"], env={"UNIRAG_APP_AUTH": "x"}).exception)


def test_queue_serialises_the_model(demo):
    fns = {f.api_name: f for f in demo.fns.values()}
    assert fns["ask"].concurrency_limit == 1 and fns["upload"].concurrency_limit == 1
    assert fns["ask"].concurrency_id == fns["upload"].concurrency_id == "model"
    assert demo._queue.max_size == MAX_QUEUE
    # the Stop button cancels the answer being written (Gradio adds the cancelling event beside "stop")
    assert "stop" in fns and [f.cancels for f in demo.fns.values() if f.is_cancel_function] == [[fns["ask"]._id]]


def fill(model, db: Path, name: str, tmp_path: Path) -> None:
    """Ingest one small document into collection `name` of `db`."""
    from unirag.retrieval import store
    from unirag.retrieval.ingest import ingest

    coll = store.open_collection(store.connect(db), name, model, create=True)
    ingest(model, coll, write_doc(tmp_path / f"in-{name}"), settings=SMALL["chunk_settings"])


def test_the_page_opens_the_collection_with_documents(tiny, tmp_path):
    db = tmp_path / "db"
    opened = lambda **kw: build_app(tiny, db=db, upload_dir=tmp_path / "up", **SMALL, **kw).unirag  # noqa: E731
    assert (opened().default_collection, opened().picked) == ("docs", "")  # nothing anywhere: docs
    # after `unirag demo --no-app`: the demo's collection is the one with documents
    fill(tiny, db, DEMO_COLLECTION, tmp_path)
    rag = opened()
    assert rag.default_collection == DEMO_COLLECTION
    assert rag.picked == "Opened `unirag-demo`, the only collection with documents (`docs` has no documents)."
    assert rag.collection_names() == [DEMO_COLLECTION]
    assert opened(collection="docs").default_collection == "docs"  # named: as asked
    store_client = rag.client
    store_client.create_collection("alien", metadata={"unirag_model": "another-model"}).add(
        ids=["x"], embeddings=[[0.0, 1.0]], documents=["not ours"])
    assert opened().default_collection == DEMO_COLLECTION  # another model's collection cannot answer here
    fill(tiny, db, "notes", tmp_path)
    rag = opened()
    assert rag.default_collection == DEMO_COLLECTION and "the demo's documents" in rag.picked
    store_client.delete_collection(DEMO_COLLECTION)
    rag = opened()
    assert rag.default_collection == "notes" and "the only collection with documents" in rag.picked
    fill(tiny, db, "more-notes", tmp_path)
    rag = opened()
    assert (rag.default_collection, rag.picked) == ("docs", "`docs` has no documents; 2 other collections do: "
                                                             "pick one under Collection.")
    fill(tiny, db, "docs", tmp_path)
    assert (opened().default_collection, opened().picked) == ("docs", "")  # docs has documents: docs


def test_app_searches_only_the_files_asked(tiny, tmp_path):
    rag = build_app(tiny, db=tmp_path / "db", upload_dir=tmp_path / "up", sources=["other.md"], **SMALL).unirag
    rag.add_files([str(write_doc(tmp_path / "in"))], "docs")
    answer = list(rag.respond(QUESTION, None, "docs"))[-1][0][-1]["content"]
    assert "no file in collection 'docs' matches --source other.md" in answer


# ---------------------------------------------------------------------- a real server on loopback
@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """One app on 127.0.0.1 with the tiny model: (url, demo)."""
    from unirag import UniModel
    root = tmp_path_factory.mktemp("app")
    model = UniModel.load(str(tiny_model_dir), precision="fp32")
    demo = launch(model, port=free_port(), prevent_thread_lock=True, quiet=True, db=root / "db",
                  upload_dir=root / "uploads", **SMALL)
    try:
        yield demo.local_url, demo
    finally:
        demo.close()


@pytest.mark.slow  # a live server
@pytest.mark.timeout(120)
def test_api_client_uploads_and_gets_a_complete_answer(server, tmp_path):
    from gradio_client import Client, handle_file

    url, demo = server
    assert demo.server_name == "127.0.0.1" and url.startswith("http://127.0.0.1:")
    client = Client(url, verbose=False)
    assert set(client.view_api(print_info=False, return_format="dict")["named_endpoints"]) == {"/ask", "/upload"}
    status, _, collection_status, _ = client.predict([handle_file(str(write_doc(tmp_path)))], "api-docs",
                                                     api_name="/upload")
    assert "`zorblax.md`: **added**" in status and "1 chunk" in collection_status
    chat, sources, box = client.predict(QUESTION, "api-docs", api_name="/ask")
    assert [m["role"] for m in chat] == ["user", "assistant"]
    assert chat[0]["content"][0]["text"] == QUESTION and chat[1]["content"][0]["text"]
    assert "[1] zorblax.md &gt; Zorblax" in sources and box == ""
    chat, _, _ = client.predict("And then?", "api-docs", api_name="/ask")
    assert len(chat) == 4  # the client's session kept its own history
    assert len(Client(url, verbose=False).predict(QUESTION, "api-docs", api_name="/ask")[0]) == 2  # others don't


@pytest.mark.slow  # a live server
@pytest.mark.timeout(120)
def test_one_answer_at_a_time_and_busy_past_the_queue(tiny, tmp_path, monkeypatch):
    """Concurrency 1 on the answer event, max_queue waiting: one more gets 'Queue is full, try again'."""
    import unirag.answer.ask
    from gradio_client import Client
    from gradio_client.utils import QueueError, Status

    running = []

    def slow_answer(*args, **kwargs):
        running.append(1)
        assert len(running) == 1, "two answers ran at once"
        try:
            for word in ("slow ", "answer"):
                time.sleep(1.0)
                yield word
        finally:
            running.pop()

    monkeypatch.setattr(unirag.answer.ask, "_pieces", slow_answer)  # the answer text the ask flow streams
    demo = launch(tiny, port=free_port(), prevent_thread_lock=True, quiet=True, db=tmp_path / "db",
                  upload_dir=tmp_path / "uploads", max_queue=1, **SMALL)
    try:
        demo.unirag.add_files([str(write_doc(tmp_path / "in"))], "docs")
        clients = [Client(demo.local_url, verbose=False) for _ in range(3)]
        first = clients[0].submit(QUESTION, "docs", api_name="/ask")
        deadline = time.time() + 30
        while first.status().code not in (Status.PROCESSING, Status.ITERATING) and time.time() < deadline:
            time.sleep(0.05)
        second = clients[1].submit(QUESTION, "docs", api_name="/ask")  # waits in the queue
        while second.status().code not in (Status.IN_QUEUE,) and not second.done() and time.time() < deadline:
            time.sleep(0.05)
        with pytest.raises(QueueError, match="Queue is full"):
            clients[2].predict(QUESTION, "docs", api_name="/ask")
        assert first.result()[0][-1]["content"][0]["text"] == "slow answer"
        assert second.result()[0][-1]["content"][0]["text"] == "slow answer"
    finally:
        demo.close()


# ---------------------------------------------------------------------- a person in a browser
def chrome():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="unirag-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1280,1100"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options), profile


@pytest.mark.slow  # a browser
@pytest.mark.timeout(180)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install chromium chromium-driver)")
def test_browser_upload_ask_and_read_the_sources(server, tmp_path):
    from selenium.webdriver.common.by import By  # the test extra (selenium); Chromium is Debian's
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    url, _ = server
    doc = write_doc(tmp_path / "docs")
    driver, profile = chrome()
    try:
        wait = WebDriverWait(driver, 60)
        driver.get(url)
        css = lambda sel: driver.find_element(By.CSS_SELECTOR, sel)  # noqa: E731
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#unirag-upload input[type=file]"))
        assert "is empty" in css("#unirag-status").text
        # the note's Markdown: the upload box's label in bold, whole
        assert [b.text for b in css("#unirag-status").find_elements(By.CSS_SELECTOR, "strong")] == ["Add documents"]

        css("#unirag-upload input[type=file]").send_keys(str(doc))
        wait.until(lambda d: "added" in css("#unirag-upload-status").text)
        assert "zorblax.md: added (1 chunk)" in css("#unirag-upload-status").text.replace("\n", "")
        wait.until(lambda d: "1 chunk" in css("#unirag-status").text)

        box = css("#unirag-question textarea")
        box.send_keys(QUESTION)
        box.send_keys(Keys.ENTER)
        bot = "#unirag-chat [data-testid='bot']"
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, bot) and css(bot).text.strip())
        answer = ""
        while answer != (answer := css(bot).text):  # streaming has ended when the text stops changing
            time.sleep(1.0)
        assert QUESTION in css("#unirag-chat [data-testid='user']").text
        assert css("#unirag-question textarea").get_attribute("value") == ""
        # a quoted document's markup stays text in the chat too
        bubble = css("#unirag-chat [data-testid='bot']")
        assert not bubble.find_elements(By.CSS_SELECTOR, "b, iframe, script")

        css("#unirag-sources-panel button.label-wrap").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#unirag-sources pre")
                   and css("#unirag-sources pre").is_displayed())
        panel = css("#unirag-sources")
        assert "[1] zorblax.md > Zorblax" in panel.text
        assert "# Zorblax\n\nA zorblax <b>sings</b> & <iframe src=x> in Quendor." in panel.text
        assert not panel.find_elements(By.CSS_SELECTOR, "b, iframe, script")  # shown as text, never as HTML
        if not answer.startswith("The documents don't say"):  # the random tiny model may abstain
            assert panel.find_elements(By.CSS_SELECTOR, "mark.unirag-evidence")  # the quoted evidence

        driver.execute_script("arguments[0].scrollIntoView({block: 'end'});", panel)
        shot = tmp_path / "unirag-app.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("UNIRAG_SCREENSHOT_DIR"):
            keep = Path(os.environ["UNIRAG_SCREENSHOT_DIR"])
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, keep / shot.name)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.slow  # a browser
@pytest.mark.timeout(240)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install chromium chromium-driver)")
def test_browser_after_the_demo_opens_its_collection_and_stop_ends_an_answer(tiny, tmp_path, monkeypatch):
    """A new user's path: `unirag demo --no-app` filled the demo's collection, `unirag app` opens
    it (and says so); an answer being written stops at Stop, and the next question is answered."""
    import unirag.answer.ask
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    def slow_answer(*args, **kwargs):  # the answer text the ask flow streams, a word at a time
        for i in range(80):
            time.sleep(0.25)
            yield f"word{i} "

    fill(tiny, tmp_path / "db", DEMO_COLLECTION, tmp_path)
    monkeypatch.setattr(unirag.answer.ask, "_pieces", slow_answer)
    demo = launch(tiny, port=free_port(), prevent_thread_lock=True, quiet=True, db=tmp_path / "db",
                  upload_dir=tmp_path / "uploads", **SMALL)
    driver, profile = chrome()
    try:
        wait = WebDriverWait(driver, 60)
        css = lambda sel: driver.find_element(By.CSS_SELECTOR, sel)  # noqa: E731
        driver.get(demo.local_url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#unirag-picked"))
        # (code spans come out of .text on lines of their own)
        assert "Openedunirag-demo,theonlycollectionwithdocuments" in "".join(css("#unirag-picked").text.split())
        assert css("#unirag-collection input").get_attribute("value") == DEMO_COLLECTION
        wait.until(lambda d: "1 chunk" in css("#unirag-status").text)

        bots = "#unirag-chat [data-testid='bot']"
        for turn in (1, 2):
            box = css("#unirag-question textarea")
            box.send_keys(QUESTION)
            box.send_keys(Keys.ENTER)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, bots)) == turn
                       and "word2" in d.find_elements(By.CSS_SELECTOR, bots)[-1].text)
            css("#unirag-stop").click()
            time.sleep(1.0)  # what was on its way when Stop was pressed
            stopped = driver.find_elements(By.CSS_SELECTOR, bots)[-1].text
            time.sleep(2.0)  # eight more words, were it still writing
            assert driver.find_elements(By.CSS_SELECTOR, bots)[-1].text == stopped and "word79" not in stopped
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        demo.close()
