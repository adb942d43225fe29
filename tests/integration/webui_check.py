#!/usr/bin/env python3
"""The web UI in a real browser (headless Chromium driven by Selenium).

    webui_check.py URL SHOTS ADMIN:PASSWORD VIEWER:PASSWORD WRITER_CMD OFFLINE_CMD DEVICE \
                   TRAFFIC_CMD TRAFFIC_FILE TRAFFIC_WRITES ISCSI_CMD INITIATOR LUN ISCSI_WRITES

Logs in as ADMIN (after a refused log-in), creates a filesystem and sees it
listed (and the API's one-line error for a duplicate), sets a property, takes and
destroys a snapshot, starts a scrub, watches the dashboard's
NFS operations counter and chart move while WRITER_CMD (an NFS client writing)
runs. On the analytics page it switches on the drill-downs by file, client,
op-latency and client-file, runs TRAFFIC_CMD (TRAFFIC_WRITES NFSv3 WRITEs to
TRAFFIC_FILE) and ISCSI_CMD (ISCSI_WRITES 4 KiB writes of INITIATOR to LUN,
"TARGET lun N"), sees the client, the share, the initiator and the LUN on the
dashboard's top lists with at least those operations and bytes, and in the
worksheet finds the file's series and row summing to TRAFFIC_WRITES, drills down
from the share's and the client's rows to their files and from the WRITE row to
its latencies, finds the heat map holding TRAFFIC_WRITES and drawn, and the
worksheet back after a reload. Then runs OFFLINE_CMD and sees DEVICE as a failed
disk on the dashboard and in the pools page's tree, logs out, then logs in as the
read-only VIEWER and finds no change buttons (on the analytics page: no switches,
an empty worksheet that works). Screenshots go to SHOTS. Exits 77 when Chromium
cannot start at all, 1 on any failed check.
"""
import json
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


def row_value(d, item, name):
    rows = d.find_elements(By.CSS_SELECTOR, item + " .an-rows tbody tr")
    for r in rows:
        if r.get_attribute("data-name") == name:
            return int(r.get_attribute("data-value"))
    return -1


def add_item(ui, stat, by, range_label):
    """Adds STAT by BY over RANGE to the worksheet; returns the new card's selector."""
    d = ui.d
    before = len(d.find_elements(By.CSS_SELECTOR, ".an-item"))
    Select(d.find_element(By.ID, "an-stat")).select_by_value(stat)
    Select(d.find_element(By.ID, "an-by")).select_by_value(by)
    Select(d.find_element(By.ID, "an-range")).select_by_visible_text(range_label)
    ui.click("#an-add", "Add to worksheet")
    ui.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".an-item")) > before, "the new worksheet item")
    item_id = d.find_elements(By.CSS_SELECTOR, ".an-item")[-1].get_attribute("data-item")
    return '.an-item[data-item="%s"]' % item_id


# Pixels of a canvas in the heat map's colours (red well above blue), not the
# background's grey or the labels'.
HEAT_PIXELS_JS = """
const c = document.querySelector(arguments[0]);
if (!c) return -1;
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let n = 0;
for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && px[i] - px[i + 2] > 60) n++;
return n;
"""


def run_traffic(cmd):
    r = subprocess.run(shlex.split(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode:
        fail("%s failed: %s" % (cmd, r.stdout[-300:]))


def top_row(d, card, name):
    """(operations, bytes) of NAME's row in a top list of the dashboard; (0, 0) if absent."""
    for r in d.find_elements(By.CSS_SELECTOR, "#%s tbody tr" % card):
        if r.get_attribute("data-name") == name:
            return int(r.get_attribute("data-ops")), int(r.get_attribute("data-bytes"))
    return 0, 0


def analytics_checks(ui, traffic_cmd, traffic_file, writes, iscsi):
    d = ui.d
    # ---- switch the costly drill-downs on from the page ----
    ui.go("analytics")
    for sw in ("nfs3.ops by file", "nfs3.ops by client", "nfs3.ops by op-latency", "nfs3.ops by client-file",
               "net.bytes by client"):
        row = '#an-switches tr[data-switch="%s"]' % sw
        if "OFF" not in ui.visible(row, "the switch of " + sw).text:
            fail("%s is on before it is switched on: %r" % (sw, d.find_element(By.CSS_SELECTOR, row).text))
        ui.click(row + " button.an-switch", "the Enable of " + sw)
        ui.wait(lambda d: "ON" in d.find_element(By.CSS_SELECTOR, row).text and
                d.find_element(By.CSS_SELECTOR, row + " button").text == "Disable", sw + " switched on")
    ui.shot("analytics-switches")
    print("ok: drill-downs by file, client, op-latency and client-file switched on from the analytics page")

    # ---- known traffic: NFSv3 WRITEs to one file, iSCSI writes to one LUN ----
    run_traffic(traffic_cmd)
    run_traffic(iscsi["cmd"])

    # ---- the dashboard's top lists (last minute): who, where, how much ----
    ui.go("dashboard")
    share = traffic_file.rsplit("/", 1)[0]
    k = iscsi["writes"]
    expect = [("top-nfs-clients", "127.0.0.1", writes, writes * 65536),
              ("top-shares", share, writes, 0),
              ("top-iscsi-initiators", iscsi["initiator"], k, k * 4096),
              ("top-luns", iscsi["lun"], k, 0)]
    for card, name, ops, nbytes in expect:
        ui.wait(lambda d: top_row(d, card, name)[0] >= ops and top_row(d, card, name)[1] >= nbytes,
                "%s in %s with %d operations and %d bytes" % (name, card, ops, nbytes))
    d.execute_script("document.getElementById('top-clients').scrollIntoView()")
    ui.shot("dashboard-top-clients")
    print("ok: top lists: " + "; ".join("%s %s ops %d bytes %d" % ((card, name) + top_row(d, card, name))
                                        for card, name, _, _ in expect))

    # ---- the worksheet: the file's row and series hold exactly the writes ----
    ui.go("analytics")
    item = add_item(ui, "nfs3.ops", "file", "Last 10 minutes (per second)")

    def series_sum(d):
        sums = d.find_element(By.CSS_SELECTOR, item + " .plot").get_attribute("data-sums")
        return json.loads(sums).get(traffic_file, -1) if sums else -1
    ui.wait(lambda d: row_value(d, item, traffic_file) == writes and series_sum(d) == writes,
            "%s at %d in the worksheet's by-file row and series" % (traffic_file, writes))
    ui.visible(item + " .plot canvas", "the by-file chart")
    print("ok: worksheet nfs3.ops by file: %s row %d, series sum %d" %
          (traffic_file, row_value(d, item, traffic_file), series_sum(d)))

    # ---- drill down: by share, then the share's row to its files ----
    share = traffic_file.rsplit("/", 1)[0]
    shares = add_item(ui, "nfs3.ops", "share", "Last 10 minutes (per second)")
    ui.wait(lambda d: row_value(d, shares, share) >= writes, "the %s row of nfs3.ops by share" % share)
    ui.click(shares + ' tr[data-name="%s"] button.an-drill' % share, "the share row's Files drill-down")
    files = '.an-item[data-by="file"][data-within="%s"]' % share
    ui.wait(lambda d: row_value(d, files, traffic_file) == writes,
            "%s at %d in the share's drill-down by file" % (traffic_file, writes))
    outside = [r.get_attribute("data-name") for r in d.find_elements(By.CSS_SELECTOR, files + " .an-rows tbody tr")
               if not r.get_attribute("data-name").startswith(share + "/")]
    if outside:
        fail("the drill-down into %s shows files of other shares: %r" % (share, outside))
    print("ok: drill-down share %s -> files: %s %d" % (share, traffic_file, writes))

    # ---- drill down: by client, then the client's row to its files (series too) ----
    clients = add_item(ui, "nfs3.ops", "client", "Last 10 minutes (per second)")
    ui.wait(lambda d: row_value(d, clients, "127.0.0.1") >= writes, "the 127.0.0.1 row of nfs3.ops by client")
    ui.click(clients + ' tr[data-name="127.0.0.1"] button.an-drill[data-drill="client-file"]',
             "the client row's Files drill-down")
    cfiles = '.an-item[data-by="client-file"][data-within="127.0.0.1"]'

    def cfile_sum(d):
        sums = d.find_element(By.CSS_SELECTOR, cfiles + " .plot").get_attribute("data-sums")
        return json.loads(sums).get(traffic_file, -1) if sums else -1
    ui.wait(lambda d: row_value(d, cfiles, traffic_file) == writes and cfile_sum(d) == writes,
            "%s at %d in the client's drill-down by file, row and series" % (traffic_file, writes))
    print("ok: drill-down client 127.0.0.1 -> files: %s %d (row and series)" % (traffic_file, writes))

    # ---- drill down: by op, then the WRITE row's latencies as a heat map ----
    ops = add_item(ui, "nfs3.ops", "op", "Last 10 minutes (per second)")
    ui.wait(lambda d: row_value(d, ops, "WRITE") >= writes, "the WRITE row of nfs3.ops by op")
    ui.click(ops + ' tr[data-name="WRITE"] button.an-drill', "the WRITE row's Latency drill-down")
    heat = '.an-item[data-by="op-latency"][data-within="WRITE"]'
    ui.wait(lambda d: d.find_elements(By.CSS_SELECTOR, heat + " .plot[data-count]") and
            int(d.find_element(By.CSS_SELECTOR, heat + " .plot").get_attribute("data-count")) == writes,
            "the WRITE latency heat map holding %d WRITEs" % writes)
    rows_sum = sum(int(r.get_attribute("data-value")) for r in d.find_elements(By.CSS_SELECTOR, heat + " .an-rows tbody tr"))
    if rows_sum != writes:
        fail("the WRITE latency buckets sum to %d, not %d" % (rows_sum, writes))
    pixels = d.execute_script(HEAT_PIXELS_JS, heat + " canvas")
    if pixels <= 0:
        fail("the heat map canvas is blank (%d heat pixels)" % pixels)
    d.execute_script("document.querySelector(arguments[0]).scrollIntoView()", heat)
    ui.shot("analytics-heatmap")
    print("ok: drill-down WRITE -> latency: heat map of %d WRITEs in %s cells, %d pixels drawn" %
          (writes, d.find_element(By.CSS_SELECTOR, heat + " .plot").get_attribute("data-cells"), pixels))

    # ---- the worksheet outlives a reload of the page ----
    kept = len(d.find_elements(By.CSS_SELECTOR, ".an-item"))
    d.refresh()
    ui.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".an-item")) == kept and
            d.find_elements(By.CSS_SELECTOR, heat + " .plot[data-count]") and
            int(d.find_element(By.CSS_SELECTOR, heat + " .plot").get_attribute("data-count")) == writes,
            "the %d worksheet items, the heat map among them, after a reload" % kept)
    print("ok: the worksheet's %d items are back after a reload" % kept)


def main():
    if len(sys.argv) != 15:
        fail(__doc__)
    url, shots, admin, viewer, writer_cmd, offline_cmd, device = sys.argv[1:8]
    traffic_cmd, traffic_file, writes = sys.argv[8], sys.argv[9], int(sys.argv[10])
    iscsi = {"cmd": sys.argv[11], "initiator": sys.argv[12], "lun": sys.argv[13], "writes": int(sys.argv[14])}
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

        analytics_checks(ui, traffic_cmd, traffic_file, writes, iscsi)

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
        ui.go("analytics")
        ui.visible('#an-switches tr[data-switch="nfs3.ops by file"]', "the switches' states")
        left = driver.find_elements(By.CSS_SELECTOR, ".an-item")
        if left:
            fail("the read-only user finds the admin's worksheet (%d items) after log-out" % len(left))
        switches = driver.find_elements(By.CSS_SELECTOR, "#main .an-switch")
        labels = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#main button")]
        if switches or "Enable" in labels or "Disable" in labels:
            fail("a read-only user sees analytics switches: %r" % labels)
        if "ON" not in driver.find_element(By.CSS_SELECTOR, '#an-switches tr[data-switch="nfs3.ops by file"]').text:
            fail("the read-only user does not see that nfs3.ops by file is on")
        item = add_item(ui, "nfs3.ops", "op", "Last 10 minutes (per second)")
        ui.wait(lambda d: row_value(d, item, "WRITE") >= writes, "the WRITE row in the read-only user's worksheet")
        ui.shot("read-only-analytics")
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
