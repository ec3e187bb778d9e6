"""Drives the house's web UI in a real headless Chromium through selenium, for
Tests/TuttiHouseHTTPTests/WebUITests.swift, which set up the house, its rooms and their sound
cards, and check afterwards what the cards played.

    python3 web_ui_test.py URL OUTPUT_DIR JOIN_ROOM VOLUME_ROOM CODE

The page first shows its login form: a wrong code is refused on the page, then CODE (from
`tutti ctl pair-controller`) signs it in. Signed in, "Pair a phone" shows a new code, which
the test then redeems as a phone would.

Prints one JSON object per step, with the CLOCK_MONOTONIC time it took effect ("t_ns"), and
exits non-zero with a one-line reason when a step fails.
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.ui import WebDriverWait

url, out, join_room, volume_room, code, waiting_room = sys.argv[1:7]


def report(step, **fields):
    print(json.dumps({"step": step, "t_ns": time.monotonic_ns(), **fields}), flush=True)


def fail(reason):
    print(json.dumps({"step": "failed", "reason": reason}), flush=True)
    sys.exit(1)


options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"]:
    options.add_argument(argument)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
# The driver Debian ships, not Selenium Manager's download: there is no internet.
driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
wait = WebDriverWait(driver, 20)


def console_errors():
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def room(name):
    return driver.find_element(By.CSS_SELECTOR, f'#rooms li[data-room="{name}"]')


def group_card(name):
    return driver.find_element(By.CSS_SELECTOR, f'.group-card[data-group="{name}"]')


def group_of(room_name):
    """The group whose card shows the room's chip, or None."""
    return driver.execute_script(
        "const chip = document.querySelector(`.group-card .room-chip[data-room=\"${arguments[0]}\"]`);"
        "return chip ? chip.closest('.group-card').dataset.group : null", room_name)


def drag_room(room_name, group, touch=False):
    """Drags the room's chip onto the group's card, with a mouse or (touch) a finger."""
    chip = driver.find_element(By.CSS_SELECTOR, f'.group-card .room-chip[data-room="{room_name}"]')
    target = group_card(group)
    dropped = time.monotonic_ns()
    if touch:
        actions = ActionBuilder(driver, mouse=PointerInput(interaction.POINTER_TOUCH, "finger"))
        (actions.pointer_action.move_to(chip).pointer_down().pause(0.2)
            .move_to(target).pause(0.2).move_to(target, 2, 2).pause(0.2).pointer_up())
        actions.perform()
    else:
        (ActionChains(driver).click_and_hold(chip).pause(0.2)
            .move_to_element_with_offset(target, 0, 0).pause(0.2)
            .move_to_element_with_offset(target, 2, 2).pause(0.2)
            .release().perform())
    try:
        wait.until(lambda d: group_of(room_name) == group)
    except Exception:
        fail(f"{room_name} was not moved to {group} by the drag: it is in {group_of(room_name)}")
    return dropped


def queue_paths():
    # In one call: the list is drawn anew on every queue event, so rows found in one call may be
    # gone by the next.
    return driver.execute_script("return [...document.querySelectorAll('#queue li')].map((row) => row.dataset.path)")


try:
    driver.get(url)
    # Signed out: the login form, and nothing of the house.
    wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
    if driver.find_element(By.ID, "house").is_displayed():
        fail("the house's page showed the house before signing in")
    errors = console_errors()
    if errors:
        fail(f"console errors on the login page: {errors}")
    secret = driver.find_element(By.ID, "login-secret")
    secret.send_keys("000000" if code != "000000" else "111111")
    driver.find_element(By.CSS_SELECTOR, '#login-form button[type="submit"]').click()
    wait.until(lambda d: d.find_element(By.ID, "login-error").is_displayed())
    refused = driver.find_element(By.ID, "login-error").text
    # The refused login's 401 is the one console error expected: read and dropped here.
    console_errors()
    secret.clear()
    secret.send_keys(code)
    driver.find_element(By.CSS_SELECTOR, '#login-form button[type="submit"]').click()
    wait.until(lambda d: d.find_element(By.ID, "connection").get_attribute("data-state") == "open")
    report("signed-in", refused=refused, cookie_http_only=(driver.get_cookie("tutti_session") or {}).get("httpOnly"),
           cookie_same_site=(driver.get_cookie("tutti_session") or {}).get("sameSite"),
           script_sees_cookie="tutti_session" in driver.execute_script("return document.cookie"))
    driver.find_element(By.ID, "pair").click()
    wait.until(lambda d: d.find_element(By.ID, "pairing").is_displayed())
    report("paired", code=driver.find_element(By.CSS_SELECTOR, "#pairing strong").text,
           text=driver.find_element(By.ID, "pairing").text)
    wait.until(lambda d: d.find_element(By.ID, "connection").get_attribute("data-state") == "open")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rooms li")) >= 2)
    wait.until(lambda d: len(queue_paths()) >= 3)
    errors = console_errors()
    if errors:
        fail(f"console errors on load: {errors}")
    report("loaded", rooms=[r.get_attribute("data-room") for r in driver.find_elements(By.CSS_SELECTOR, "#rooms li")])

    # The groups side by side: the default plays in one room, the other is in a group of its own.
    wait.until(lambda d: group_of(join_room) not in (None, "default") and group_of(volume_room) == "default")
    report("groups", groups=[card.get_attribute("data-group") for card in driver.find_elements(By.CSS_SELECTOR, ".group-card")])
    # Drag a room onto the default group's card; the feed then shows it playing.
    report("joined", room=join_room, t_ns=drag_room(join_room, "default"))
    wait.until(lambda d: room(join_room).find_element(By.CSS_SELECTOR, ".state").text == "playing")
    report("playing", room=join_room)

    # Move a volume slider: a click at 40 % of its width.
    slider = room(volume_room).find_element(By.CSS_SELECTOR, ".volume-slider")
    width = slider.size["width"]
    ActionChains(driver).move_to_element_with_offset(slider, int(width * 0.4 - width / 2), 0).click().perform()
    value = int(slider.get_attribute("value"))
    report("volume", room=volume_room, percent=value)
    wait.until(lambda d: room(volume_room).find_element(By.CSS_SELECTOR, "output").text == str(value))

    # Drag the last queue item above the second.
    before = queue_paths()
    handles = driver.find_elements(By.CSS_SELECTOR, "#queue li .handle")
    target = driver.find_elements(By.CSS_SELECTOR, "#queue li")[1]
    (ActionChains(driver).click_and_hold(handles[-1]).pause(0.2)
        .move_to_element_with_offset(target, 0, -target.size["height"] // 2 + 2).pause(0.2)
        .move_to_element_with_offset(target, 0, -target.size["height"] // 2 + 1).pause(0.2)
        .release().perform())
    expected = before[:1] + [before[-1]] + before[1:-1]
    try:
        wait.until(lambda d: queue_paths() == expected)
    except Exception:
        fail(f"the queue did not become {expected} after the drag: {queue_paths()}")
    report("dragged", before=before, after=queue_paths())

    # Search the library and play a result.
    search = driver.find_element(By.ID, "search-input")
    search.send_keys("tone 660")
    driver.find_element(By.CSS_SELECTOR, '#search-form button[type="submit"]').click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#library-results li.track")) >= 1)
    result = driver.find_elements(By.CSS_SELECTOR, "#library-results li.track")[0]
    found = result.get_attribute("data-path")
    result.find_element(By.CSS_SELECTOR, 'button[data-action="play-now"]').click()
    try:
        wait.until(lambda d: "Tone 660" in d.find_element(By.ID, "title").text and d.find_element(By.ID, "state").text == "playing")
    except Exception:
        fail(f"the search result {found} did not start playing: title {driver.find_element(By.ID, 'title').text!r}")
    report("searched", path=found, title=driver.find_element(By.ID, "title").text)

    # Now playing shows the track's embedded cover (64 × 64), its title, artist and album.
    def cover_loaded(d):
        image = d.find_element(By.ID, "art")
        return image.is_displayed() and d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", image) or False
    try:
        width = wait.until(cover_loaded)
    except Exception:
        fail(f"no cover art shown for {found}: {driver.find_element(By.ID, 'art').get_attribute('src')!r}")
    report("artwork", width=width, title=driver.find_element(By.ID, "title").text,
           artist_album=driver.find_element(By.ID, "artist-album").text)

    # The plots draw new samples.
    plot = driver.find_element(By.ID, "sync-plot")
    # In view: an element screenshot below the fold shows what is not painted.
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", plot)
    first_image = plot.screenshot_as_base64
    first = int(plot.get_attribute("data-samples"))
    wait.until(lambda d: int(plot.get_attribute("data-samples")) > first + 2)
    if plot.screenshot_as_base64 == first_image:
        fail(f"the sync plot's pixels did not change: {first} samples, then {plot.get_attribute('data-samples')}; "
             f"console: {console_errors()}")
    report("plotted", samples_before=first, samples_after=int(plot.get_attribute("data-samples")))

    # Set a room's latency: the house reports it back, and the box shows it.
    latency = room(volume_room).find_element(By.CSS_SELECTOR, ".latency")
    latency.clear()
    latency.send_keys("25\n")
    driver.find_element(By.ID, "title").click()  # leave the box: it shows what the house says
    try:
        wait.until(lambda d: room(volume_room).find_element(By.CSS_SELECTOR, ".latency").get_attribute("value") == "25"
                   and d.execute_script("return document.activeElement.className") != "latency")
    except Exception:
        fail(f"the latency box of {volume_room} did not settle at 25")
    report("latency", room=volume_room)

    # A new group, a room dragged into it and music of its own, chosen while it is shown;
    # its transport pauses its room only.
    driver.find_element(By.ID, "new-group-name").send_keys("Radio\n")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '.group-card[data-group="Radio"]'))
    drag_room(join_room, "Radio")
    group_card("Radio").find_element(By.CSS_SELECTOR, ".group-name").click()
    wait.until(lambda d: d.find_element(By.ID, "selected-group").text == "Radio")
    search.clear()
    search.send_keys("tone 440")
    driver.find_element(By.CSS_SELECTOR, '#search-form button[type="submit"]').click()
    # Found and clicked in one call: the results are drawn anew when the search's reply comes.
    wait.until(lambda d: d.execute_script("""
        const row = [...document.querySelectorAll('#library-results li.track')].find((r) => r.dataset.path.endsWith(arguments[0]));
        if (!row) return false;
        row.querySelector('button[data-action="play-now"]').click();
        return true;""", "tone-0.flac"))
    try:
        wait.until(lambda d: group_card("Radio").find_element(By.CSS_SELECTOR, ".group-state").text == "playing"
                   and room(join_room).find_element(By.CSS_SELECTOR, ".state").text == "playing")
    except Exception:
        fail(f"Radio did not play: {group_card('Radio').text!r}")
    report("radio", title=group_card("Radio").find_element(By.CSS_SELECTOR, ".group-title").text,
           default_title=group_card("default").find_element(By.CSS_SELECTOR, ".group-title").text)
    time.sleep(1.5)  # what the test measures: both groups playing
    group_card("Radio").find_element(By.CSS_SELECTOR, ".group-play-pause").click()
    try:
        wait.until(lambda d: group_card("Radio").find_element(By.CSS_SELECTOR, ".group-state").text == "paused")
    except Exception:
        fail(f"Radio did not pause: {group_card('Radio').text!r}")
    report("radio-paused", default_state=group_card("default").find_element(By.CSS_SELECTOR, ".group-state").text)
    time.sleep(1.5)  # what the test measures: one group paused, the other playing
    for width, height in [(390, 844), (1280, 900)]:
        driver.set_window_size(width, height)
        viewport = driver.execute_script("return window.innerWidth")
        driver.execute_script("window.scrollTo(0, 0)")
        # Two animation frames: the page has laid itself out and painted at the new size.
        driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(done));")
        path = f"{out}/web-ui-{width}.png"
        driver.save_screenshot(path)
        report("screenshot", path=path, viewport=viewport)

    # Back to the default group, by a finger this time, for what the test does next over the API.
    group_card("default").find_element(By.CSS_SELECTOR, ".group-name").click()
    drag_room(join_room, "default", touch=True)
    report("back", room=join_room, touch=True)

    # A new speaker waits, with its code; Admit lets it in, and it becomes a room.
    selector = f'#waiting li[data-speaker="{waiting_room}"]'
    try:
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, selector) and d.find_element(By.CSS_SELECTOR, selector).is_displayed())
    except Exception:
        fail(f"speaker {waiting_room} was never shown waiting: {driver.find_element(By.ID, 'waiting').text!r}")
    waiting = driver.find_element(By.CSS_SELECTOR, selector)
    shown = waiting.find_element(By.CSS_SELECTOR, ".admission-code").text
    waiting.find_element(By.CSS_SELECTOR, "button.admit").click()
    try:
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#rooms li[data-room="{waiting_room}"]')
                   and not d.find_elements(By.CSS_SELECTOR, selector))
    except Exception:
        fail(f"speaker {waiting_room} was not admitted: {driver.find_element(By.ID, 'waiting').text!r}")
    report("admitted", room=waiting_room, code=shown)

    # The new room plays the mean of the channels; then it and the join room become a stereo
    # pair (named at the prompt), one room with its halves shown; Unpair gives back the two.
    channel = Select(room(waiting_room).find_element(By.CSS_SELECTOR, ".channel"))
    channel.select_by_value("mono")
    driver.find_element(By.ID, "title").click()
    try:
        wait.until(lambda d: d.execute_script("return document.activeElement.className") != "channel"
                   and room(waiting_room).find_element(By.CSS_SELECTOR, ".channel").get_attribute("value") == "mono")
    except Exception:
        fail(f"{waiting_room}'s channel did not settle at mono")
    Select(room(waiting_room).find_element(By.CSS_SELECTOR, ".pair-with")).select_by_value(join_room)
    prompt = wait.until(lambda d: d.switch_to.alert)
    prompt.send_keys("Den")
    prompt.accept()
    try:
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#rooms li[data-room="Den"]')
                   and not d.find_elements(By.CSS_SELECTOR, f'#rooms li[data-room="{waiting_room}"]')
                   and not d.find_elements(By.CSS_SELECTOR, f'#rooms li[data-room="{join_room}"]'))
    except Exception:
        fail(f"no stereo pair Den: {driver.find_element(By.ID, 'rooms').text!r}")
    halves = room("Den").find_element(By.CSS_SELECTOR, ".pair-halves").text
    report("stereo-paired", halves=halves)
    room("Den").find_element(By.CSS_SELECTOR, ".unpair").click()
    try:
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#rooms li[data-room="{waiting_room}"]')
                   and d.find_elements(By.CSS_SELECTOR, f'#rooms li[data-room="{join_room}"]')
                   and not d.find_elements(By.CSS_SELECTOR, '#rooms li[data-room="Den"]'))
    except Exception:
        fail(f"the pair Den was not unbound: {driver.find_element(By.ID, 'rooms').text!r}")
    report("stereo-unpaired", channel=room(waiting_room).find_element(By.CSS_SELECTOR, ".channel").get_attribute("value"))

    def shown_group_status():
        """The shown group's status, as the house answers it to this page's session."""
        return driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "const group = encodeURIComponent(document.getElementById('selected-group').textContent);"
            "fetch(`/api/groups/${group}/status`).then((r) => r.json()).then(done, (e) => done({error: String(e)}));")

    def set_crossfade(seconds):
        Select(driver.find_element(By.ID, "crossfade")).select_by_value(str(seconds))
        try:
            wait.until(lambda d: shown_group_status().get("crossfadeSeconds") == seconds)
        except Exception:
            fail(f"crossfade {seconds} s was not set: {shown_group_status()!r}")

    set_crossfade(4)
    report("crossfade", seconds=shown_group_status().get("crossfadeSeconds"))
    # Gapless again for what the test checks of the cards afterwards.
    set_crossfade(0)
    errors = console_errors()
    if errors:
        fail(f"console errors: {errors}")
    report("done")
finally:
    driver.quit()
