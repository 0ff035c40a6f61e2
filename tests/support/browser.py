"""The console as an operator runs it (`engram console`, a process of its own) and a headless Chromium driving it
through Selenium (Debian's chromium and chromium-driver, which `make test` installs).

Selenium blocks while a page loads, and a page of the console is answered by engram's services, which a test runs in
its own event loop: so every call of `Browser` runs in a thread, and the services keep answering meanwhile.
"""
import asyncio
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.polling import eventually

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REQUIRED = "CI"  # when set, a missing browser fails the tests, never skips them
WINDOW = (1280, 900)
# This machine has no network: without these Chromium keeps trying to reach Google's services.
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--window-size={WINDOW[0]},{WINDOW[1]}")
ENGRAM = Path(sys.executable).parent / "engram"  # .venv/bin/engram, the command an operator runs
WAIT_S = 30.0  # for a page, or for something to appear on one
GONE = "does not belong to the document"
T = TypeVar("T")


def missing_browser() -> str | None:
    """Why Chromium cannot be driven here, or None when it can."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return f"{' and '.join(absent)} not found: `make test` installs Debian's chromium and chromium-driver"
    return None


def require_browser() -> None:
    """Skip (or, with CI set, fail) when Chromium or its driver is missing."""
    reason = missing_browser()
    if reason is not None:
        if os.environ.get(REQUIRED):
            pytest.fail(reason)
        pytest.skip(reason)


def start_chromium(folder: Path) -> WebDriver:
    """A headless Chromium with a fresh profile in `folder` (chromedriver's log beside it). Dialogs stay open, so a
    test can tell whether a page raised one."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={folder / 'profile'}"):
        options.add_argument(flag)
    options.unhandled_prompt_behavior = "ignore"
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(folder / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_window_size(*WINDOW)
    driver.set_page_load_timeout(WAIT_S)
    return driver


@dataclass
class ConsoleProcess:
    """`engram console` running, and where it answers."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        """What the console printed so far."""
        return self.log.read_text(errors="replace")


def console_environment(**variables: str) -> dict[str, str]:
    """The environment of an operator's shell: PATH and a home, no ENGRAM_* of the test's own, and `variables`."""
    return {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir(), "COLUMNS": "200", **variables}


async def start_console(args: list[str], env: dict[str, str], port: int, log: Path) -> ConsoleProcess:
    """`engram console <args>` on `port`, once GET /healthz answers (it fails with the console's output if the
    process ends first)."""
    with log.open("wb") as out:
        process = subprocess.Popen([str(ENGRAM), "console", "--port", str(port), *args], env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    console = ConsoleProcess(process, f"http://127.0.0.1:{port}", log)

    async def healthy() -> bool:
        if process.poll() is not None:
            return True  # checked below
        try:
            async with httpx.AsyncClient(timeout=2.0) as http:
                return (await http.get(f"{console.url}/healthz")).text == "ok"
        except httpx.TransportError:
            return False

    try:
        await eventually(healthy, timeout_s=60, interval_s=0.2)
    except AssertionError:
        stop_console(console)
        raise AssertionError(f"the console did not answer /healthz in 60 s:\n{console.output()}") from None
    assert process.poll() is None, f"the console exited with {process.returncode}:\n{console.output()}"
    return console


def stop_console(console: ConsoleProcess, grace_s: float = 15.0) -> int:
    """SIGTERM, then SIGKILL after `grace_s`; the exit code."""
    if console.process.poll() is None:
        console.process.send_signal(signal.SIGTERM)
        try:
            return console.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            console.process.kill()
    return console.process.wait(timeout=grace_s)


class Browser:
    """One Chromium on the console, for async tests: each method runs its Selenium calls in a thread."""

    def __init__(self, driver: WebDriver, base_url: str, screenshots: Path) -> None:
        self.driver = driver
        self.base_url = base_url
        self.screenshots = screenshots

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.to_thread(work)

    def _until(self, probe: Callable[[WebDriver], T | None], message: str, timeout_s: float = WAIT_S) -> T:
        """Poll `probe` until it returns something other than None (an element that went away with its page, or
        is not there yet, counts as None); what it returned."""
        def attempt(driver: WebDriver) -> list[T] | Literal[False]:
            try:
                found = probe(driver)
            except (NoSuchElementException, StaleElementReferenceException):
                return False
            except WebDriverException as exc:
                if GONE in str(exc.msg):  # chromedriver's word, at times, for an element of a page replaced
                    return False
                raise
            return False if found is None else [found]  # a list: an empty text is a result too
        boxed: list[T] = WebDriverWait(self.driver, timeout_s, poll_frequency=0.05).until(attempt, message)
        return boxed[0]

    def _settled(self, marker: str | None = None) -> None:
        """Wait until the page has loaded, and when `marker` is given, until it is a new page (the marker was set
        on the one before)."""
        def settled(driver: WebDriver) -> bool:
            try:
                return bool(driver.execute_script(
                    "return document.readyState === 'complete' && window.engramTestPage !== arguments[0]",
                    marker))
            except WebDriverException:  # between two pages: no document to ask yet
                return False
        WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05).until(
            settled, f"no new page loaded after {self.driver.current_url}")

    async def open(self, path: str) -> str:
        """Load the console's `path` (and wait for it); the path it ended on (after redirects)."""
        def work() -> str:
            self.driver.get(self.base_url + path)
            self._settled()
            return self.path()
        return await self._run(work)

    def path(self) -> str:
        """The current page's path and query."""
        url: str = self.driver.current_url
        return url.removeprefix(self.base_url)

    async def click(self, css: str) -> str:
        """Click the element and wait until the page it leads to has loaded; that page's path."""
        def work() -> str:
            marker = secrets.token_hex(8)
            self.driver.execute_script("window.engramTestPage = arguments[0]", marker)

            def press(driver: WebDriver) -> bool | None:
                element = driver.find_element(By.CSS_SELECTOR, css)
                if not (element.is_displayed() and element.is_enabled()):
                    return None
                element.click()
                return True
            self._until(press, f"nothing to click at {css!r} on {self.path()}")
            self._settled(marker)
            return self.path()
        return await self._run(work)

    async def type(self, css: str, text: str) -> None:
        """Type into the field (emptied first)."""
        def work() -> None:
            def field(driver: WebDriver) -> WebElement | None:
                element = driver.find_element(By.CSS_SELECTOR, css)
                return element if element.is_displayed() else None
            found = self._until(field, f"no field {css!r} on {self.path()}")
            found.clear()
            found.send_keys(text)
        await self._run(work)

    async def text(self, css: str) -> str:
        """The rendered text of the first element matching `css` (waiting for it)."""
        return await self._run(lambda: self._until(
            lambda driver: str(driver.find_element(By.CSS_SELECTOR, css).text), f"no {css!r} on {self.path()}"))

    async def texts(self, css: str) -> list[str]:
        """The rendered texts of every element matching `css` (none: an empty list, at once)."""
        return await self._run(lambda: self._until(
            lambda driver: [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)], css))

    async def attributes(self, css: str, name: str) -> list[str]:
        """The attribute `name` of every element matching `css`."""
        return await self._run(lambda: self._until(
            lambda driver: [str(e.get_attribute(name)) for e in driver.find_elements(By.CSS_SELECTOR, css)], css))

    async def wait_for(self, css: str, contains: str = "", timeout_s: float = WAIT_S) -> str:
        """Wait until an element matching `css` shows `contains`; its text."""
        def shown(driver: WebDriver) -> str | None:
            texts = [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)]
            return next((t for t in texts if contains in t), None)
        return await self._run(lambda: self._until(
            shown, f"nothing matching {css!r} shows {contains!r} on {self.path()}", timeout_s))

    async def cookies(self) -> set[str]:
        """The names of the cookies the browser holds for the console (HttpOnly ones too)."""
        return await self._run(lambda: {str(c["name"]) for c in self.driver.get_cookies()})

    async def script(self, code: str, *args: Any) -> Any:
        """Run JavaScript in the page; what it returns."""
        return await self._run(lambda: self.driver.execute_script(code, *args))

    async def alert(self) -> str | None:
        """The text of an open dialog (alert, confirm, prompt), or None."""
        def work() -> str | None:
            try:
                return str(self.driver.switch_to.alert.text)
            except NoAlertPresentException:
                return None
        return await self._run(work)

    async def new_tab(self) -> str:
        """Open a new tab and switch to it; the handle of the tab it left."""
        def work() -> str:
            left = str(self.driver.current_window_handle)
            self.driver.switch_to.new_window("tab")
            return left
        return await self._run(work)

    async def only_tab(self, handle: str) -> None:
        """Close every tab but `handle`, and switch to it."""
        def work() -> None:
            for other in [h for h in self.driver.window_handles if h != handle]:
                self.driver.switch_to.window(other)
                self.driver.close()
            self.driver.switch_to.window(handle)
        await self._run(work)

    async def screenshot(self, name: str) -> Path:
        """Save the window as `console-<name>.png` in the screenshots folder."""
        path = self.screenshots / f"console-{name}.png"
        assert await self._run(lambda: self.driver.save_screenshot(str(path))), path
        return path

    async def refusal(self) -> str | None:
        """The code and message of the console's error page when the browser shows one, else None."""
        def work() -> str | None:
            codes = self.driver.find_elements(By.ID, "error-code")
            messages = self.driver.find_elements(By.ID, "error-message")
            return f"{codes[0].text} {messages[0].text if messages else ''}".strip() if codes else None
        return await self._run(work)

    async def overflow(self) -> int:
        """By how many pixels the page is wider than the window, scroll bar included (0: it fits)."""
        width, window = await self.script("return [document.documentElement.scrollWidth, window.innerWidth]")
        return max(0, int(width) - int(window))

    async def snapshot(self, name: str) -> Path:
        """Save a screenshot of the page (see `screenshot`), which must be no wider than the window."""
        path = await self.screenshot(name)
        assert await self.overflow() <= 1, f"{self.path()} is wider than the window"
        return path

    async def assert_not_found(self, path: str) -> None:
        """The console answers `path` with its not-found page."""
        await self.open(path)
        assert await self.text("h1") == "Not found", f"{path} shows {await self.text('h1')!r}"
        assert await self.text("#error-code") in ("404", "not_found"), path

    async def sign_out(self) -> None:
        """End the browser's session with the sign-out button, when the page shows one, then forget every cookie."""
        if not self.driver.current_url.startswith(self.base_url):
            return  # a fresh browser: no page of the console yet, no cookie of its own
        if self.driver.find_elements(By.ID, "signout"):
            landed = await self.click("#signout")
            assert landed == "/signin", f"signing out was refused: {await self.refusal()}"
        await self._run(self.driver.delete_all_cookies)

    async def sign_in(self, token: str) -> str:
        """Sign in with `token` from the sign-in page (signed out first); the path the console then shows."""
        await self.sign_out()
        await self.open("/signin")
        await self.type("#token", token)
        landed = await self.click("#signin")
        assert landed != "/signin", f"signing in was refused: {await self.refusal() or 'the sign-in page again'}"
        return landed
