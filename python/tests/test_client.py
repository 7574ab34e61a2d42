"""lshbench.Client against a real `lshbench serve` (the CLI binary the other tests use), and the server's page in
a real headless Chromium driven by selenium."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import lshbench
from lshbench import Client, ServerError

from conftest import _find_cli


class Server:
    """`lshbench serve --index DIR --listen 127.0.0.1:0 ARGS`, stopped with SIGTERM."""

    def __init__(self, index: Path, *args: str):
        self.proc = subprocess.Popen(
            [str(_find_cli()), "serve", "--index", str(index), "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.wait(timeout=30)
            raise RuntimeError(f"serve did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split()[-1]
        # Drain stderr so the server never blocks on it.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=60)


@pytest.fixture()
def server(tmp_path):
    s = Server(tmp_path / "index", "--create")
    yield s
    if s.proc.poll() is None:
        s.stop()


def test_check_query_insert_get_delete_and_stats(server):
    c = Client(server.url)
    assert c.health()
    text = "the quick brown fox jumps over the lazy dog, and again, and again"
    first = c.check([{"id": "a/1", "text": text}, ("caf\u00e9 b", text + "!")])
    assert [r["inserted"] for r in first] == [True, True]
    assert first[0]["duplicates"] == []
    dup = first[1]["duplicates"]
    assert [d["id"] for d in dup] == ["a/1"]
    assert 0.5 <= dup[0]["jaccard"] <= 1 and 0 <= dup[0]["estimate"] <= 1
    assert first[1]["seq"] == first[0]["seq"] + 1
    # if-unique: reported, not inserted; an id already in the index is not inserted again.
    again = c.check([("c", text), ("a/1", "something else")], insert="if-unique")
    assert again[0]["inserted"] is False and again[0]["reason"] == "duplicate"
    assert again[1]["inserted"] is False and again[1]["reason"] == "exists"
    # query inserts nothing; it takes bare texts.
    q = c.query([text, {"id": "mine", "text": "nothing like it at all, a different sentence"}])
    assert {d["id"] for d in q[0]["duplicates"]} == {"a/1", "caf\u00e9 b"}
    assert q[1] == {"id": "mine", "duplicates": [], "unchecked": 0, "empty": False}
    assert c.insert([("empty", "")])[0]["inserted"] is True
    # Ids with a slash and non-ASCII characters travel percent-encoded.
    assert c.get("a/1")["text"] == text
    assert c.get("caf\u00e9 b")["seq"] == first[1]["seq"]
    assert c.get("empty")["empty"] is True
    assert c.get("nope") is None
    assert c.delete("a/1") is True
    assert c.delete("a/1") is False
    assert c.get("a/1") is None
    stats = c.stats()
    assert stats["documents"] == 2
    assert stats["params"]["verify"] == "exact" and stats["params"]["bands"] == 35
    assert stats["memory_bytes_per_document"] > 0 and stats["disk_bytes"] > 0
    assert len(stats["scurve"]) == 101
    c.close()


def test_errors_are_server_errors_with_status_and_message(server):
    c = Client(server.url)
    with pytest.raises(ServerError) as e:
        c.insert([{"id": "", "text": "x"}])
    assert e.value.status == 400 and "id is empty" in e.value.message
    with pytest.raises(ServerError) as e:
        c.check([("a", "x")] * 1001)
    assert e.value.status == 413 and "1001 documents" in e.value.message
    with pytest.raises(ValueError):
        c.check([("a", "x")], insert="sometimes")
    with pytest.raises(TypeError):
        c.check(["a text without an id"])
    with pytest.raises(ValueError):
        c.check([{"id": "a", "text": "x", "lang": "en"}])
    with pytest.raises(ValueError):
        Client("https://example.invalid")
    # The connection survives a refused request.
    assert c.check([("ok", "fine")])[0]["inserted"] is True


def test_a_token_is_sent_and_required(tmp_path):
    s = Server(tmp_path / "index", "--create", "--token", "hunter2-hunter2")
    try:
        with pytest.raises(ServerError) as e:
            Client(s.url).stats()
        assert e.value.status == 401
        assert Client(s.url, token="hunter2-hunter2").stats()["documents"] == 0
        assert Client(s.url).health()
    finally:
        assert s.stop() == 0


def test_the_mail_corpus_through_the_client_gives_dedups_pairs(server, corpus, cli, tmp_path):
    ids, texts = corpus
    ids, texts = ids[:1500], texts[:1500]
    c = Client(server.url)
    got = []
    for start in range(0, len(ids), 200):
        for r in c.check(zip(ids[start : start + 200], texts[start : start + 200])):
            for d in r["duplicates"]:
                got.append((d["id"], r["id"], f"{d['estimate']:.6f}", f"{d['jaccard']:.6f}"))
    path = tmp_path / "part.jsonl"
    import json

    with open(path, "w", encoding="utf-8") as f:
        for i, t in zip(ids, texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    cli("dedup", "--input", path, "--pairs", tmp_path / "pairs.csv")
    with open(tmp_path / "pairs.csv", newline="") as f:
        want = [(r["id_a"], r["id_b"], r["estimate"], r["jaccard"]) for r in csv.DictReader(f)]
    assert len(want) > 200
    assert sorted(got) == sorted(want)


def test_threads_with_a_client_each_and_a_restart(tmp_path, corpus):
    ids, texts = corpus
    s = Server(tmp_path / "index", "--create")
    seqs = {}

    def work(k):
        c = Client(s.url)
        for start in range(k * 100, k * 100 + 100, 10):
            for r in c.check(zip(ids[start : start + 10], texts[start : start + 10])):
                seqs[r["id"]] = r["seq"]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs.values()) == list(range(1, 401))
    assert s.stop() == 0
    s = Server(tmp_path / "index")
    try:
        c = Client(s.url)
        assert c.stats()["documents"] == 400
        for i in ids[:400:37]:
            assert c.get(i)["seq"] == seqs[i]
    finally:
        s.stop()


def _chromium():
    """Debian's Chromium and ChromeDriver, and selenium: all three, or the reason one is missing."""
    missing = [p for p in ("/usr/bin/chromium", "/usr/bin/chromedriver") if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    return missing


def test_the_page_in_headless_chromium_shows_the_index_and_finds_near_duplicates(server, corpus):
    missing = _chromium()
    if missing:
        # CI installs all three (.ci/run): there a missing one is a failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail(f"the browser test needs {', '.join(missing)}")
        pytest.skip(f"needs {', '.join(missing)} (apt-get install chromium chromium-driver; pip install selenium)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ids, texts = corpus
    c = Client(server.url)
    c.check(zip(ids[:300], texts[:300]))
    # A mail with near-duplicates among the first 300 (itself one of them), found through the API.
    results = c.query(texts[:300])
    i = next(i for i, r in enumerate(results) if len(r["duplicates"]) >= 3)
    want = {d["id"] for d in results[i]["duplicates"]}
    text = texts[i]

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ):
        options.add_argument(flag)
    profile = Path(server.url.split("//")[1].replace(":", "_"))
    user_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"lshbench-chromium-{profile}"
    options.add_argument(f"--user-data-dir={user_dir}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
    try:
        driver.get(server.url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_element(By.ID, "size").text not in ("", "…"))
        assert driver.find_element(By.ID, "size").text == "300"
        params = driver.find_element(By.ID, "params").text
        assert "35 bands × 3 rows" in params and "oph-opt" in params and "0.5" in params
        # The S-curve: 101 points, and at the threshold the banding's probability (35x3 at 0.5: 0.9926).
        curve = driver.find_element(By.ID, "curve")
        import json

        points = json.loads(curve.get_attribute("data-points"))
        assert len(points) == 101
        assert abs(points[50][1] - (1 - (1 - 0.5**3) ** 35)) < 1e-9
        assert len(curve.get_attribute("points").split()) == 101
        # Paste a text, press the button, read the answer.
        box = driver.find_element(By.ID, "text")
        driver.execute_script("arguments[0].value = arguments[1];", box, text)
        driver.find_element(By.ID, "find").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results tr.duplicate"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#results tr.duplicate")
        shown = {r.find_elements(By.TAG_NAME, "td")[0].text for r in rows}
        assert shown == want
        assert "near-duplicate" in driver.find_element(By.ID, "summary").text
        # A text with no near-duplicate says so.
        driver.execute_script("arguments[0].value = 'zzz qqq nothing like any mail';", box)
        driver.find_element(By.ID, "find").click()
        wait.until(lambda d: "No near-duplicates" in d.find_element(By.ID, "summary").text)
    finally:
        driver.quit()
        shutil.rmtree(user_dir, ignore_errors=True)
