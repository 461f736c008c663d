#!/usr/bin/python3
"""`attnscope report`'s page in a real browser (issue 34): Debian's Chromium, headless, driven by Selenium
through chromedriver, opening index.html from a file:// URL with the network switched off.

    check_report_browser.py ATTNSCOPE WORK_DIR DATA_DIR [SCREENSHOT_DIR]

Checks: no console error; every chart is drawn (an SVG with marks) and every maps image is loaded and not
blank; a click on an overview cell scrolls to its head; hovering a cell shows its value in a tooltip; and the
page opens (load to every overview drawn) in under 5 s. Paged by layer (--pages layer): index.html draws the
overviews and links each layer's page; a click on an overview cell opens the head's layer page scrolled to that
head, whose charts and maps are drawn; every layer page holds the heads the overview links to it, draws them all,
and its previous / next / overview links open those pages; no console error on any page. With SCREENSHOT_DIR the
page is captured at 1600x1000 and 1280x720, and one head of the causal LM (docs/report-*.png;
tools/make_screenshots.sh passes docs/).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
    return cond


def browser(width, height, profile):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}",
              "--allow-file-access-from-files", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    # --window-size is the window's, with the browser's own bars; the page (and its screenshots) get all of it.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return driver


def wait_for(driver, script, seconds=20, *args):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if driver.execute_script(script, *args):
            return True
        time.sleep(0.05)
    return False


def wait_for_element(driver, section, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if driver.execute_script("return arguments[0].querySelectorAll('.charts svg').length >= 2", section):
            return True
        time.sleep(0.05)
    return False


DRAWN = """
const svgs = [...document.querySelectorAll('.overview svg')];
return svgs.length === window.ATTNSCOPE_REPORT.inputs.length && svgs.every(s => s.querySelectorAll('path, rect').length > 10);
"""

IMAGE_NOT_BLANK = """
const img = arguments[0];
if (!img.complete || img.naturalWidth === 0) return false;
const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext('2d'); g.drawImage(img, 0, 0);
const d = g.getImageData(0, 0, c.width, c.height).data;
const colours = new Set();
for (let i = 0; i < d.length; i += 4 * 97) colours.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
return colours.size > 20;
"""


def check_heads(driver, where, expected):
    """Every head section of the page open: its charts drawn with marks, its maps image loaded and not blank."""
    heads = driver.find_elements(By.CSS_SELECTOR, "section.head")
    check(len(heads) == expected, f"{where}: {len(heads)} head sections, expected {expected}")
    # A head's charts are drawn when it comes into view: stop at each until they are.
    for h in heads:
        driver.execute_script("arguments[0].scrollIntoView()", h)
        wait_for_element(driver, h)
    for h in heads:
        name = h.get_attribute("id")
        charts = h.find_elements(By.CSS_SELECTOR, ".charts svg")
        check(len(charts) >= 2, f"{where} {name}: {len(charts)} charts drawn")
        for c in charts:
            marks = driver.execute_script("return arguments[0].querySelectorAll('path').length", c)
            check(marks >= 3, f"{where} {name}: a chart without marks")
        img = h.find_element(By.CSS_SELECTOR, "img.maps")
        check(driver.execute_script(IMAGE_NOT_BLANK, img), f"{where} {name}: the maps image is missing or blank")
    check(driver.execute_script("return (window.ATTNSCOPE_REPORT_FAILURES || []).length") == 0,
          f"{where}: a chart failed: " + str(driver.execute_script("return window.ATTNSCOPE_REPORT_FAILURES")))


def console_errors(driver, where):
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    check(not errors, f"{where}: console errors: {errors[:3]}")


def page_name(driver):
    return driver.execute_script("return decodeURIComponent(location.pathname.split('/').pop())")


def wait_for_page(driver, page, seconds=20):
    """The page `page` (a file name of the report) is open and its script has built it."""
    return wait_for(driver, "return decodeURIComponent(location.pathname.split('/').pop()) === arguments[0] && "
                            "document.readyState === 'complete' && document.querySelector('main section') !== null",
                    seconds, page)


IN_VIEW = """const e = document.getElementById(decodeURIComponent(location.hash.slice(1)));
if (!e) return null; const r = e.getBoundingClientRect(); return [r.top, innerHeight];"""


def check_paged(driver, out, size):
    """The report paged by layer: overview -> a head's layer page -> previous, next, overview; every layer page."""
    driver.get("file://" + os.path.join(out, "index.html"))
    check(wait_for(driver, DRAWN), f"{size} paged: the overviews were not drawn")
    check(not driver.find_elements(By.CSS_SELECTOR, "section.head"), f"{size} paged: head sections on the overview")
    pages = driver.execute_script("return window.ATTNSCOPE_REPORT.inputs.flatMap(i => i.pages.map(p => p.page))")
    links = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, ".layer-pages a")]
    check([l.rsplit("/", 1)[-1] for l in links] == pages, f"{size} paged: layer links {links} for pages {pages}")
    console_errors(driver, f"{size} paged index.html")
    # A click on an overview cell opens its head's layer page, scrolled to it.
    cells = driver.find_elements(By.CSS_SELECTOR, "#overview-vit_digits svg .mark-rect path")
    if not check(len(cells) >= 36, f"{size} paged: {len(cells)} overview cells"):
        return
    ActionChains(driver).move_to_element(cells[5]).click().perform()
    opened = wait_for(driver, "return location.pathname.endsWith('-layer-1.html') && document.readyState === 'complete' "
                              "&& location.hash.startsWith('#vit_digits-l1-h')", 10)
    if not check(opened, f"{size} paged: a click on a cell did not open its layer page: "
                         f"{driver.execute_script('return location.href')}"):
        return
    head = driver.find_element(By.ID, driver.execute_script("return decodeURIComponent(location.hash.slice(1))"))
    check(driver.execute_script("return document.querySelector('section.head') !== arguments[0]", head),
          f"{size} paged: the cell's head is its page's first (opening it would need no scroll): pick another cell")
    check(wait_for_element(driver, head), f"{size} paged: the head's charts were not drawn")
    time.sleep(0.3)
    top = driver.execute_script(IN_VIEW)
    check(top and 0 <= top[0] < top[1] / 2, f"{size} paged: the head is not in view on its layer page: top {top}")
    img = head.find_element(By.CSS_SELECTOR, "img.maps")
    check(wait_for(driver, "return arguments[0].complete", 10, img) and driver.execute_script(IMAGE_NOT_BLANK, img),
          f"{size} paged: the head's maps image is blank")
    console_errors(driver, f"{size} vit_digits-layer-1.html")
    # Previous, next, overview: plain links.
    for link, page in [("next", "vit_digits-layer-2.html"), ("prev", "vit_digits-layer-1.html"),
                       ("prev", "vit_digits-layer-0.html")]:
        found = driver.find_elements(By.ID, link)
        if not check(found, f"{size} paged: {page_name(driver)} has no '{link}' link"):
            return
        found[0].click()
        if not check(wait_for_page(driver, page), f"{size} paged: '{link}' opened {page_name(driver)}, not {page}"):
            return
    check(not driver.find_elements(By.ID, "prev") and driver.find_elements(By.CSS_SELECTOR, "#pages .off"),
          f"{size} paged: the first layer's page links a previous one")
    driver.find_element(By.ID, "overview").click()
    check(wait_for_page(driver, "index.html") and wait_for(driver, DRAWN),
          f"{size} paged: 'overview' opened {page_name(driver)}")
    check(driver.execute_script("return location.hash") == "#input-vit_digits", f"{size} paged: overview link's anchor")
    # Every layer page: the heads the overview links to it, each drawn.
    index_links = driver.execute_script(
        "return window.ATTNSCOPE_REPORT.inputs.flatMap(i => i.units.map(u => [u.page, u.anchor]))")
    for page in pages:
        driver.get("file://" + os.path.join(out, page))
        if not check(wait_for_page(driver, page), f"{size} paged: {page} did not open"):
            continue
        anchors = [a for p, a in index_links if p == page]
        ids = driver.execute_script("return [...document.querySelectorAll('section.head')].map(s => s.id)")
        check(sorted(ids) == sorted(anchors), f"{size} {page}: heads {ids}, the overview links {anchors}")
        check_heads(driver, f"{size} {page}", len(anchors))
        console_errors(driver, f"{size} {page}")


def main(BIN, WORK, DATA, SHOTS=None):
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    out = os.path.join(WORK, "R")
    p = subprocess.run([BIN, "report", os.path.join(DATA, "vit_digits.h5"), os.path.join(DATA, "trained_lm_mhla.h5"),
                        "--out", out, "--jobs", "2"], capture_output=True, text=True)
    if not check(p.returncode == 0, f"report failed: {p.stderr[-2000:]}"):
        return
    paged = os.path.join(WORK, "RP")   # the same report paged by layer (its runs copied: nothing is measured again)
    shutil.copytree(os.path.join(out, "runs"), os.path.join(paged, "runs"))
    p = subprocess.run([BIN, "report", os.path.join(DATA, "vit_digits.h5"), os.path.join(DATA, "trained_lm_mhla.h5"),
                        "--out", paged, "--pages", "layer"], capture_output=True, text=True)
    if not check(p.returncode == 0, f"paged report failed: {p.stderr[-2000:]}"):
        return
    url = "file://" + os.path.join(out, "index.html")
    for width, height in [(1600, 1000), (1280, 720)]:
        profile = tempfile.mkdtemp(prefix="chromium-profile-")
        driver = browser(width, height, profile)
        try:
            t0 = time.monotonic()
            driver.get(url)
            drawn = wait_for(driver, DRAWN)
            took = time.monotonic() - t0
            check(drawn, f"{width}x{height}: the overviews were not drawn")
            check(took < 5, f"{width}x{height}: the page took {took:.1f} s to draw its overviews")
            print(f"{width}x{height}: overviews drawn {took:.2f} s after the page was asked for")
            check_heads(driver, f"{width}x{height}", 20)
            # Hover on an overview cell: the tooltip shows its value.
            driver.execute_script("window.scrollTo(0, 0)")
            cells = driver.find_elements(By.CSS_SELECTOR, "#overview-vit_digits svg .mark-rect path")
            check(len(cells) >= 36, f"{len(cells)} overview cells")
            if cells:
                ActionChains(driver).move_to_element(cells[5]).perform()
                shown = wait_for(driver, "const t = document.getElementById('vg-tooltip-element'); "
                                         "return t && t.classList.contains('visible') && /rank/.test(t.textContent)", 5)
                text = driver.execute_script("const t = document.getElementById('vg-tooltip-element'); return t ? t.textContent : ''")
                check(shown and any(ch.isdigit() for ch in text), f"hover shows no value: {text!r}")
                # Click: the page scrolls to that head.
                ActionChains(driver).move_to_element(cells[5]).click().perform()
                moved = wait_for(driver, "return location.hash.startsWith('#vit_digits-l')", 5)
                check(moved, "a click on an overview cell did not open its head: hash " + driver.execute_script("return location.hash"))
                if moved:
                    top = driver.execute_script("const e = document.getElementById(location.hash.slice(1)); "
                                                "const r = e.getBoundingClientRect(); return [r.top, innerHeight]")
                    check(0 <= top[0] < top[1] / 2, f"the head is not in view after the click: top {top}")
            # Hover over a head's entropy chart: the nearest query's token from the file and every mechanism's value.
            head = driver.find_element(By.ID, "trained_lm_mhla-l1-h0")
            driver.execute_script("arguments[0].scrollIntoView()", head)
            if check(wait_for_element(driver, head), "the LM head's charts were not drawn"):
                charts = head.find_elements(By.CSS_SELECTOR, ".charts svg")
                check(len(charts) == 3, f"{len(charts)} charts on the LM head")
                if len(charts) == 3:
                    ActionChains(driver).move_to_element_with_offset(charts[1], 10, 0).perform()
                    got = wait_for(driver, "const t = document.getElementById('vg-tooltip-element'); "
                                           "return t && t.classList.contains('visible') && /query token/.test(t.textContent)", 5)
                    text = driver.execute_script("const t = document.getElementById('vg-tooltip-element'); "
                                                 "return t ? t.textContent : ''")
                    m = re.match(r"query(\d+)query token‘(.*)’softmax[-\d.e]+linear[-\d.e]+MHLA[-\d.e]+$", text or "")
                    tokens = driver.execute_script("return window.ATTNSCOPE_REPORT.inputs[1].tokens")
                    shown = (lambda t: t.replace("·", " ").replace("\\n", "\n"))(m.group(2)) if m else None
                    check(got and m and tokens and shown == tokens[int(m.group(1))],
                          f"hover on the entropy chart: {text!r} (the file's token there: "
                          f"{tokens[int(m.group(1))] if m and tokens else None!r})")
            if SHOTS:
                driver.execute_script("window.scrollTo(0, 0)")
                time.sleep(0.3)
                driver.save_screenshot(os.path.join(SHOTS, f"report-{width}x{height}.png"))
                if width == 1600:   # one head of the causal LM: maps, numbers, spectra, entropy, profile
                    head = driver.find_element(By.ID, "trained_lm_mhla-l1-h0")
                    driver.execute_script("arguments[0].scrollIntoView()", head)
                    wait_for_element(driver, head)
                    time.sleep(0.5)
                    driver.save_screenshot(os.path.join(SHOTS, "report-head.png"))
            console_errors(driver, f"{width}x{height}")
            check_paged(driver, paged, f"{width}x{height}")
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
    for f in FAILS[:40]:
        print("FAIL:", f)
    sys.exit(1 if FAILS else 0)
