"""A hostile web page and a rebound DNS name against the house, in a real headless Chromium
through selenium, for Tests/TuttiHouseHTTPTests/BrowserAttackTests.swift (which starts the
house and checks afterwards that nothing changed).

    python3 browser_attack.py HOUSE_URL ROOM CODE

0. The browser is a household's: it signs in at the house's login page with CODE (from
   `tutti ctl pair-controller`), so it holds the house's session cookie. The attack page is
   on the same host, another port: the same *site*, to which a SameSite=Strict cookie is still
   sent; only the house's Origin check stands between it and the house.
1. CSRF: a page served from another origin (this script's own HTTP server, another port)
   sends what a page needs no permission to send: a `no-cors` text/plain POST to
   /api/control turning ROOM's volume down to 3, the same through a submitted HTML form, and
   a WebSocket to /api/events.
2. DNS rebinding: Chromium resolves `rebound.test` to the house's address (as a rebound name
   would) and loads http://rebound.test:PORT/api/status, which a page of that name could read.

Prints one JSON object per step and exits non-zero with a one-line reason when a step cannot
be carried out (not when the house refuses: the test judges that).
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

house, room, code = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
house_port = urlparse(house).port

ATTACK_PAGE = """<!doctype html><html><body>
<form id="form" method="POST" action="%(house)s/api/control" enctype="text/plain" target="sink">
<input name='{"command":"volume","room":"%(room)s","percent":3,"pad":"' value='"}'>
</form><iframe name="sink" id="sink"></iframe>
<script>
window.attack = async function () {
  const results = {};
  try {
    await fetch("%(house)s/api/control", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({command: "volume", room: "%(room)s", percent: 3})});
    results.fetch = "sent";
  } catch (error) { results.fetch = "failed: " + error; }
  results.form = await new Promise((resolve) => {
    document.getElementById("sink").onload = () => resolve("submitted");
    document.getElementById("form").submit();
    setTimeout(() => resolve("no answer"), 5000);
  });
  results.websocket = await new Promise((resolve) => {
    const socket = new WebSocket("%(house)s".replace("http", "ws") + "/api/events");
    socket.onopen = () => { socket.close(); resolve("opened"); };
    socket.onerror = () => resolve("refused");
    setTimeout(() => resolve("no answer"), 5000);
  });
  return results;
};
</script></body></html>
""" % {"house": house, "room": room}


class AttackPage(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ATTACK_PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def fail(reason):
    print(json.dumps({"step": "failed", "reason": reason}), flush=True)
    sys.exit(1)


attacker = ThreadingHTTPServer(("127.0.0.1", 0), AttackPage)
threading.Thread(target=attacker.serve_forever, daemon=True).start()
attack_url = "http://127.0.0.1:%d/" % attacker.server_address[1]

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 # What a rebound name does: the page's own name now resolves to the house.
                 "--host-resolver-rules=MAP rebound.test 127.0.0.1"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
driver.set_script_timeout(30)
try:
    driver.get(house + "/")
    wait = WebDriverWait(driver, 20)
    wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
    driver.find_element(By.ID, "login-secret").send_keys(code)
    driver.find_element(By.CSS_SELECTOR, '#login-form button[type="submit"]').click()
    try:
        wait.until(lambda d: d.find_element(By.ID, "connection").get_attribute("data-state") == "open")
    except Exception:
        fail("the house's page did not sign in with the code: " + driver.find_element(By.ID, "login-error").text)
    report("signed-in", cookie=bool(driver.get_cookie("tutti_session")))

    driver.get(attack_url)
    if driver.execute_script("return typeof window.attack") != "function":
        fail("the attack page did not load from " + attack_url)
    results = driver.execute_async_script("window.attack().then(arguments[arguments.length - 1]);")
    report("cross-origin", page=attack_url, **results)

    driver.get("http://rebound.test:%d/api/status" % house_port)
    text = driver.find_element("tag name", "body").text
    report("rebinding", url=driver.current_url, body=text[:400])
finally:
    driver.quit()
    attacker.shutdown()
