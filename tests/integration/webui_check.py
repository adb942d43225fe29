#!/usr/bin/env python3
"""The web UI in a real browser (headless Chromium driven by Selenium).

    webui_check.py URL SHOTS ADMIN:PASSWORD VIEWER:PASSWORD WRITER_CMD OFFLINE_CMD DEVICE

Logs in as ADMIN (after a refused log-in), creates a filesystem and sees it
listed (and the API's one-line error for a duplicate), sets a property, takes and
destroys a snapshot, starts a scrub, watches the dashboard's
NFS operations counter and chart move while WRITER_CMD (an NFS client writing)
runs, runs OFFLINE_CMD and sees DEVICE as a failed disk on the dashboard and in
the pools page's tree, logs out, then logs in as the read-only VIEWER and finds
no change buttons. Screenshots go to SHOTS. Exits 77 when Chromium cannot start
at all, 1 on any failed check.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import time

try:
    from selenium import webdriver
    from selenium.common.exceptions import (StaleElementReferenceException, TimeoutException,
                                            WebDriverException)
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError as e:
    print("skip: python3-selenium is not installed (%s)" % e)
    sys.exit(77)

WAIT_S = 30  # generous: the checks wait for a state, never for a time


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def start_browser(scratch):
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--ignore-certificate-errors", "--window-size=1400,1000",
                "--user-data-dir=" + os.path.join(scratch, "chromium-profile")):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"),
                      log_output=os.path.join(scratch, "chromedriver.log")) \
        if "log_output" in Service.__init__.__code__.co_varnames else \
        Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"),
                log_path=os.path.join(scratch, "chromedriver.log"))
    try:
        return webdriver.Chrome(service=service, options=opts)
    except WebDriverException as e:
        print("skip: Chromium cannot start here: %s" % str(e).splitlines()[0])
        sys.exit(77)


class Ui:
    def __init__(self, driver, url, shots):
        self.d = driver
        self.url = url
        self.shots = shots
        self.n = 0

    def wait(self, cond, what, timeout=WAIT_S):
        try:
            # A page re-rendered between finding an element and reading it: look again.
            return WebDriverWait(self.d, timeout, poll_frequency=0.2,
                                 ignored_exceptions=[StaleElementReferenceException]).until(cond)
        except TimeoutException:
            self.shot("failed")
            fail("%s (waited %d s); page text: %s" % (what, timeout, self.text()[:400]))

    def text(self):
        try:
            return self.d.find_element(By.TAG_NAME, "body").text
        except WebDriverException:
            return "?"

    def visible(self, css, what):
        return self.wait(EC.visibility_of_element_located((By.CSS_SELECTOR, css)), what)

    def shot(self, name):
        self.n += 1
        path = os.path.join(self.shots, "%02d-%s.png" % (self.n, name))
        self.d.save_screenshot(path)
        print("screenshot " + path)

    def click(self, where, what):
        by = By.XPATH if where.startswith("//") else By.CSS_SELECTOR
        self.wait(EC.element_to_be_clickable((by, where)), what).click()

    def go(self, page):
        self.click('#nav a[data-page="%s"]' % page, "the %s link" % page)
        self.wait(lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == page and
                  "loading" not in d.find_element(By.ID, "main").get_attribute("class"),
                  "the %s page to load" % page)

    def login(self, user, password):
        self.visible("#login-user", "the log-in form")
        for css, value in (("#login-user", user), ("#login-password", password)):
            el = self.d.find_element(By.CSS_SELECTOR, css)
            el.clear()
            el.send_keys(value)
        self.click("#login-submit", "the log-in button")

    def logout(self):
        self.click("#logout", "the log-out button")
        self.visible("#login-view", "the log-in form after log-out")

    def dialog_fill(self, values):
        self.visible("#dialog[open] form", "the dialog")
        for name, value in values.items():
            el = self.d.find_element(By.CSS_SELECTOR, '#dialog [name="%s"]' % name)
            if el.tag_name == "select":
                Select(el).select_by_visible_text(value)
            else:
                el.clear()
                el.send_keys(value)
        self.click("#dialog-ok", "the dialog's OK button")

    def toast(self, pattern, what):
        self.wait(lambda d: d.find_element(By.ID, "toast").is_displayed() and
                  re.search(pattern, d.find_element(By.ID, "toast").text), what)
        return self.d.find_element(By.ID, "toast").text

    def number(self, css):
        m = re.match(r"\s*([0-9.]+)", self.d.find_element(By.CSS_SELECTOR, css).text or "")
        return float(m.group(1)) if m else None


def main():
    if len(sys.argv) != 8:
        fail(__doc__)
    url, shots, admin, viewer, writer_cmd, offline_cmd, device = sys.argv[1:]
    admin_user, admin_pw = admin.split(":", 1)
    viewer_user, viewer_pw = viewer.split(":", 1)
    os.makedirs(shots, exist_ok=True)
    driver = start_browser(shots)
    writer = None
    try:
        ui = Ui(driver, url, shots)
        driver.get(url + "/")
        ui.visible("#login-view", "the log-in page")

        # ---- log-in: a refusal as the API's one line, then in ----
        ui.login(admin_user, "not the password")
        ui.wait(lambda d: "wrong user name or password" in d.find_element(By.ID, "login-error").text,
                "the refused log-in's message")
        ui.shot("login-refused")
        ui.login(admin_user, admin_pw)
        ui.visible(".pool-card", "the dashboard's pool card after log-in")
        ui.wait(lambda d: admin_user in d.find_element(By.ID, "whoami").text, "the user name in the bar")
        card = driver.find_element(By.CSS_SELECTOR, '.pool-card[data-pool="tank"]')
        if "ONLINE" not in card.text or "All devices online" not in card.text:
            fail("a healthy pool's card: %r" % card.text)
        print("ok: logged in; dashboard shows tank ONLINE")

        # ---- create a filesystem, see it listed; a duplicate's error ----
        ui.go("datasets")
        ui.click("#create-dataset", "Create dataset")
        ui.dialog_fill({"name": "tank/webfs", "type": "filesystem"})
        ui.wait(lambda d: any(c.text == "tank/webfs" for c in d.find_elements(By.CSS_SELECTOR, "td .ds-name")),
                "tank/webfs in the datasets table")
        ui.click("#create-dataset", "Create dataset")
        ui.dialog_fill({"name": "tank/webfs", "type": "filesystem"})
        msg = ui.toast(r"exists", "the duplicate's error message")
        if "\n" in msg or "{" in msg:
            fail("the error is not one line of text: %r" % msg)
        ui.shot("datasets")
        print("ok: created tank/webfs in the browser; duplicate refused with: %s" % msg)

        # ---- set a property from the row's dialog; the table shows it ----
        row = '//tr[td/span[@class="ds-name" and text()="tank/webfs"]]'
        ui.click(row + '//button[text()="Set property"]', "tank/webfs's Set property")
        ui.dialog_fill({"prop": "compression", "value": "off"})
        ui.toast(r"compression set on tank/webfs", "the property's notice")
        ui.wait(lambda d: "off" in [c.text for c in d.find_elements(By.XPATH, row + "/td")][6:7],
                "compression=off in tank/webfs's row")
        print("ok: compression=off set on tank/webfs from its row")

        # ---- snapshots: take one, see it, destroy it after the confirmation ----
        ui.go("snapshots")
        ui.click("#create-snapshot", "Take snapshot")
        ui.dialog_fill({"dataset": "tank/webfs", "snap": "ui1"})
        snap_row = '//tr[td[text()="tank/webfs@ui1"]]'
        ui.wait(lambda d: d.find_elements(By.XPATH, snap_row), "tank/webfs@ui1 in the snapshots table")
        ui.shot("snapshots")
        ui.click(snap_row + '//button[text()="Destroy"]', "the snapshot's Destroy")
        ui.visible("#dialog[open]", "the confirmation")
        if "cannot be undone" not in driver.find_element(By.ID, "dialog").text:
            fail("the destroy confirmation: %r" % driver.find_element(By.ID, "dialog").text)
        ui.click("#dialog-ok", "the confirmation's Destroy")
        ui.wait(lambda d: not d.find_elements(By.XPATH, snap_row), "tank/webfs@ui1 to go")
        print("ok: snapshot taken and destroyed (after a confirmation)")

        # ---- a scrub started from the pools page ----
        ui.go("pools")
        ui.click("#scrub-tank", "Start scrub")
        ui.toast(r"Scrub started", "the scrub's notice")
        ui.wait(lambda d: re.search(r"scrub: (scanning|finished)", ui.text()), "the scrub's state")
        print("ok: scrub started from the browser")

        # ---- the NFS operations chart moves while a client writes ----
        ui.go("dashboard")
        ui.visible("#nfs-ops-chart canvas", "the NFS operations chart")
        ui.wait(lambda d: re.match(r"\d+ operations", d.find_element(By.ID, "nfs-ops-total").text),
                "the NFS operations total")
        before = ui.number("#nfs-ops-total")
        writer_err = open(os.path.join(shots, "writer.err"), "w+")
        writer = subprocess.Popen(shlex.split(writer_cmd), stdout=subprocess.DEVNULL,
                                  stderr=writer_err, start_new_session=True)

        def writer_runs():
            if writer.poll() is not None:
                writer_err.seek(0)
                fail("the NFS writer exited (%d): %s" % (writer.returncode, writer_err.read()[-300:]))
            return True
        ui.wait(lambda d: writer_runs() and (ui.number("#nfs-ops-rate") or 0) > 0 and
                (ui.number("#nfs-ops-total") or 0) >= before + 20,
                "the NFS operations rate and total to rise while a client writes")
        ui.wait(lambda d: (ui.number("#nfs-bytes-rate") or 0) > 0, "the NFS throughput to rise")
        # The chart itself: the points it draws, the newest ones from the writes.
        plot = driver.find_element(By.CSS_SELECTOR, "#nfs-ops-chart .plot")
        first = int(plot.get_attribute("data-points"))
        ui.wait(lambda d: int(plot.get_attribute("data-points")) >= first + 6 and
                float(plot.get_attribute("data-last") or 0) > 0,
                "six more points on the NFS operations chart, the newest above 0")
        ui.shot("dashboard-nfs-writes")
        print("ok: NFS ops %s/s, total %d -> %d while writing" %
              (ui.number("#nfs-ops-rate"), before, ui.number("#nfs-ops-total")))
        os.killpg(writer.pid, signal.SIGTERM)
        writer.wait()
        writer = None

        # ---- a failed disk shows on the dashboard and in the pool's tree ----
        subprocess.run(shlex.split(offline_cmd), check=True)
        ui.go("pools")
        ui.go("dashboard")
        alert = ui.visible('.pool-card[data-pool="tank"] .alert[data-device="%s"]' % device,
                           "the offlined disk's alert on the dashboard")
        if "OFFLINE" not in alert.text:
            fail("the disk's alert: %r" % alert.text)
        card = driver.find_element(By.CSS_SELECTOR, '.pool-card[data-pool="tank"]')
        if "DEGRADED" not in card.text:
            fail("the pool's card with a disk offline: %r" % card.text)
        ui.shot("dashboard-degraded")
        ui.go("pools")
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")]
        if not any(device in r and "OFFLINE" in r for r in rows):
            fail("the pools page's tree: %r" % rows)
        ui.shot("pools-tree")
        print("ok: %s shown OFFLINE (pool DEGRADED) on the dashboard and the pools page" % device)

        # ---- log out: the pages' data goes with the session ----
        ui.logout()
        driver.get(url + "/#/datasets")
        driver.refresh()  # a new load of the page: only the cookie could log it in
        ui.visible("#login-view", "the log-in form (no session after log-out)")
        if driver.find_element(By.ID, "shell").is_displayed():
            fail("the shell is shown after log-out")
        print("ok: logged out")

        # ---- a read-only user sees no change buttons ----
        ui.login(viewer_user, viewer_pw)
        ui.wait(lambda d: "viewer" in d.find_element(By.ID, "whoami").text and
                d.find_element(By.ID, "main").get_attribute("data-page") == "datasets",
                "the datasets page as the read-only user")
        for page in ("dashboard", "pools", "datasets", "snapshots", "shares", "iscsi"):
            ui.go(page)
            buttons = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#main button")]
            if buttons:
                fail("a read-only user sees change buttons on %s: %r" % (page, buttons))
        ui.go("datasets")
        if "tank/webfs" not in ui.text():
            fail("the read-only user does not see the datasets")
        ui.shot("read-only-datasets")
        print("ok: the read-only user sees the pages and no change buttons")

        # ---- the strict CSP refused nothing the pages need ----
        csp = [e["message"] for e in driver.get_log("browser")
               if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]
        if csp:
            fail("the browser reported CSP violations: %r" % csp)
        print("ok: no Content-Security-Policy violations")
    finally:
        if writer:
            os.killpg(writer.pid, signal.SIGTERM)
        driver.quit()


if __name__ == "__main__":
    main()
