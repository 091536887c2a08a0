"""The documentation's promises about itself: every shell command the front page (README.md) or a
page under docs/ shows in a ```bash or ```sh block is run by a named test of this suite, or by
.ci/run; the front page's links land on pages and headings that exist; the README stays a
front page (at most 300 lines). ``mkdocs build --strict`` in .ci/run checks the links between
the pages under docs/."""

from __future__ import annotations

import re
from pathlib import Path

from doc_pages import README, ROOT, all_pages, shell_commands

TESTS = ROOT / "tests"  # every folder of the suite, wherever this file lives in it

# Each shell command of the docs (comments cut, `\` continuations joined, `export` lines left
# out: they only set variables) must match one of these patterns; the tests named beside it run
# it, most of them taking the line from the page itself (tests/doc_pages.py), the others
# running the same command line with the test desktop's address and a stand-in model.
COVERED: list[tuple[str, tuple[str, ...]]] = [
    # a first run (README, Getting started) and many desktops
    (
        r"(VNC_USE_DESKTOP_DIR=\S+ )?vnc-use run (--view )?--task \"Open the terminal and show"
        r" the disk usage\"",
        ("test_run_without_vnc_starts_the_local_desktop_and_completes",),
    ),
    (
        r"vnc-use run --vnc (localhost::5901|desk-01::5901 --runs-dir \S+) --task \"Open the"
        r" terminal and show the disk usage\"( --json)?",
        (
            "test_json_lines_are_the_events_and_the_readme_command",
            "test_readme_offline_flow_with_the_stand_in_command",
        ),
    ),
    # the web console (docs/console.md)
    (
        r"vnc-use console --vnc \S+ --runs-dir \S+",
        ("test_a_run_started_from_the_form_shows_each_step_within_a_second",),
    ),
    (
        r"vnc-use console --fleet \S+ --runs-dir \S+",
        ("test_the_console_over_a_fleet_starts_approves_and_lists_the_fleets_runs",),
    ),
    (
        r"vnc-use console --server \S+ --vnc \S+ --runs-dir \S+",
        ("test_a_served_run_from_the_form_is_approved_in_the_page_and_clicks_once",),
    ),
    # a fleet of desktop hosts (docs/fleet.md)
    (
        r"vnc-use worker --database \S+ --worker-id \S+ --runs-dir \S+ --vnc( \S+)+",
        ("test_a_fleet_of_two_workers_survives_one_killed_and_waits_for_people",),
    ),
    (
        r"vnc-use worker --worker-id \S+ --runs-dir \S+ --rdp( \S+)+ --rdp-user \S+",
        (
            "test_a_worker_owns_an_rdp_host_and_another_goes_on_when_it_dies",
            "test_a_wrong_rdp_password_stops_the_worker_at_its_start_in_one_line",
        ),
    ),
    (
        r"vnc-use (run --fleet \S+ --task \"Click #r0\" --thread-id r0 --no-hitl|approve --fleet"
        r" \S+ r6|report --fleet \S+ r0 --out \S+|fleet status --fleet \S+)",
        ("test_a_fleet_of_two_workers_survives_one_killed_and_waits_for_people",),
    ),
    (
        r"vnc-use (report|show) --fleet \S+ r0",
        ("test_a_run_goes_on_on_another_host_with_its_whole_history",),
    ),
    (
        r"vnc-use fleet prune --fleet \S+ --older-than \S+",
        ("test_prune_deletes_a_finished_runs_content_and_keeps_a_waiting_ones",),
    ),
    (
        r"vnc-use resume \S+ --fleet \S+ --vnc \S+",
        ("test_a_run_whose_local_desktop_died_ends_error_and_resumes_on_another_desktop",),
    ),
    (
        r"vnc-use eval --suite builtin --fleet \S+ --label eval --out \S+",
        ("test_eval_fleet_runs_the_builtin_suite_over_two_workers_one_killed",),
    ),
    # providers, Gemini's families, local models
    (
        r"vnc-use run --provider (gemini|anthropic|openai|openai-compatible) .*",
        (
            "test_every_provider_command_of_the_readme_runs",
            "test_the_readme_command_runs_against_the_stand_in",
            "test_readme_local_models_commands_run_against_the_stand_in",
            "test_readme_local_models_stand_in_command_pair",
        ),
    ),
    (
        r"vnc-use calibrate( --provider openai-compatible --base-url \S+ --model \S+)?",
        ("test_every_command_of_the_docs_is_fine_with_a_right_model",),
    ),
    (
        r"python -m vnc_use\.testing\.openai_standin --script script\.json --port 8011 &",
        ("test_readme_local_models_stand_in_command_pair",),
    ),
    (
        r"vnc-use run --model gemini-3\.5-flash --environment desktop --vnc localhost::5901"
        r" --task \".*\"",
        ("test_cli_run_with_gemini_35_on_the_desktop",),
    ),
    # VNC servers: a Mac, and its imitation in front of a test desktop
    (
        r"vnc-use run --vnc mac\.local::5900 --task \".*\"",
        ("test_macos_login_types_exactly",),
    ),
    (
        r"python -m vnc_use\.testing\.desktop --probe",
        ("test_desktop_command_serves_a_desktop_until_stopped",),
    ),
    (
        r"RFB_FRONT_PASSWORD='[^']*' VNC_PASSWORD=<desktop password> python -m"
        r" vnc_use\.testing\.rfb_front --profile macos --backend 127\.0\.0\.1::PORT --user alice",
        ("test_the_command_line_front",),
    ),
    # Windows and RDP
    (
        r"vnc-use run --rdp winbox\.local --task \".*\"",
        ("test_four_steps_over_rdp_with_nla", "test_kept_bridge_serves_runs_and_the_live_view"),
    ),
    (
        r"vnc-use run --rdp xrdp-host --rdp-user alice --rdp-allow-unverified-login --task \".*\"",
        ("test_four_steps_on_xrdp_type_exactly_without_caps_lock",),
    ),
    (
        r"vnc-use run --rdp xrdp-host --rdp-user alice --rdp-allow-unverified-login"
        r" --rdp-paste-text --task \".*\"",
        ("test_paste_text_puts_unicode_on_xrdp_and_restores_the_clipboard",),
    ),
    (
        r"vnc-use (desktop rdp winbox\.local|view --vnc 127\.0\.0\.1::41261)",
        ("test_kept_bridge_serves_runs_and_the_live_view",),
    ),
    # the local desktop and the live view
    (
        r"vnc-use (desktop (up|status|down)|view)",
        (
            "test_up_prints_the_address_and_its_processes_outlive_the_command",
            "test_down_stops_exactly_what_it_started",
            "test_view_shows_the_desktop_in_a_browser",
            "test_kept_bridge_serves_runs_and_the_live_view",
        ),
    ),
    # approvals, PostgreSQL and leases
    (
        r"vnc-use (approve|deny|resume) 3f2a9c1d0b7e",
        (
            "test_approval_from_the_shell",
            "test_denial_from_the_shell",
            "test_kill_9_mid_run_then_resume_from_a_new_process",
        ),
    ),
    (
        r"vnc-use stop 3f2a9c1d0b7e",
        ("test_stop_refuses_a_run_that_is_not_running_and_records_one_for_a_run_that_is",),
    ),
    (
        r"vnc-use run --vnc desk-01::5901 --runs-dir /shared/runs --confirm click_at --task"
        r" \"Submit the form\"",
        ("test_a_run_awaiting_approval_is_approved_from_a_second_process",),
    ),
    (
        r"vnc-use approve 3f2a9c1b7d4e --runs-dir /shared/runs --lease-timeout 120",
        (
            "test_a_run_awaiting_approval_is_approved_from_a_second_process",
            "test_a_second_run_on_a_leased_desktop_waits_then_fails_naming_the_holder",
        ),
    ),
    # taking a run over, handing it back, a model that asks for a person (docs/takeover.md)
    (
        r"vnc-use (takeover 3f2a9c1d0b7e( --force)?|view --interactive 3f2a9c1d0b7e|handback"
        r" 3f2a9c1d0b7e --note \".*\")",
        ("test_takeover_pauses_the_run_and_handback_goes_on",),
    ),
    (
        r"vnc-use (takeover --fleet env 3f2a9c1d0b7e|handback --fleet env 3f2a9c1d0b7e --note"
        r" \".*\")",
        ("test_a_fleet_run_is_taken_over_and_handed_back",),
    ),
    (
        r"vnc-use resume 3f2a9c1d0b7e --answer \".*\"",
        ("test_a_model_that_asks_for_a_person_waits_and_gets_the_answer",),
    ),
    # eval
    (
        r"vnc-use eval --suite builtin --desktops 2 --out eval-out",
        ("test_the_oracle_passes_every_builtin_task",),
    ),
    (
        r"vnc-use eval tasks\.yaml --desktops 2 --out eval-out --repeat 2",
        ("test_the_readme_task_file_and_command",),
    ),
    (
        r"vnc-use eval --suite builtin --desktops 2 --out eval-out --server \S+ .*",
        ("test_eval_runs_its_tasks_as_threads_on_the_server",),
    ),
    # LangGraph Server
    (
        r"VNC_PASSWORD_07=\.\.\. LANGGRAPH_CLI_NO_ANALYTICS=1 langgraph dev .*",
        ("test_the_readme_starts_langgraph_dev_as_these_tests_do",),
    ),
    (
        r"vnc-use (run|runs|approve|deny|resume) --server http://127\.0\.0\.1:2024\b.*",
        ("test_the_readme_server_commands",),
    ),
    # MCP, replay, the run folder, secrets, testing offline
    (r"vnc-use mcp( .*)?", ("test_the_readme_commands_and_host_snippet",)),
    (
        r"vnc-use replay 3f2a9c1d0b7e( .*)?",
        (
            "test_a_changed_desktop_stops_the_replay_before_step_2",
            "test_heal_hands_the_rest_to_the_model",
        ),
    ),
    (r"vnc-use (runs|show \S+|report \S+( --gif)?)", ("test_readme_history_commands",)),
    # the video of a run (docs/video.md)
    (
        r"vnc-use run --task \"(Open the settings and turn on dark mode|Click the OK button)\""
        r"( --no-video| --video-fps 8)?",
        ("test_a_killed_run_leaves_a_playable_video", "test_no_video_records_none"),
    ),
    (r"vnc-use report \S+ --video", ("test_the_report_plays_the_video_and_seeks_to_step_3",)),
    # stalls and cost
    (
        r"vnc-use (run --task \"Rename the file to report\.txt\" .*|resume THREAD_ID( .*)?)",
        ("test_the_commands_of_the_cost_and_stalls_page",),
    ),
    (
        r"vnc-use run --vnc localhost::5901 --sensitive pin --task \"Unlock the screen with"
        r" \{\{pin\}\}\"",
        ("test_sensitive_text_reaches_the_desktop_and_nothing_else",),
    ),
    (
        r"(echo '\[.*\]' > script\.json|python -m vnc_use\.testing\.gemini_standin --script"
        r" script\.json --port 8765 &|GOOGLE_GEMINI_BASE_URL=http://127\.0\.0\.1:8765"
        r" GOOGLE_API_KEY=dummy vnc-use run --vnc localhost::5901 --task \"Click the middle\")",
        ("test_readme_offline_flow_with_the_stand_in_command",),
    ),
]

# Commands .ci/run itself runs: each a line of .ci/run, or (the server extra) installed by
# ./scripts/install.sh through the dev extra, which holds every package of the server extra.
BY_CI = {
    "./scripts/install.sh": "./scripts/install.sh",
    ".venv/bin/python -m pytest": ".venv/bin/python -m pytest",
}
SERVER_EXTRA = "pip install -e '.[server]'"


def documented_commands() -> dict[str, list[str]]:
    """Every documented command, with the pages that show it."""
    where: dict[str, list[str]] = {}
    for path in all_pages():
        for command in shell_commands(path.read_text("utf-8")):
            where.setdefault(command, []).append(str(path.relative_to(ROOT)))
    return where


def defined_tests() -> set[str]:
    """The names of the test functions of this suite (in any folder of tests/)."""
    pattern = re.compile(r"^(?:async )?def (test_\w+)\(", re.M)
    return {
        name
        for path in TESTS.rglob("test_*.py")
        for name in pattern.findall(path.read_text("utf-8"))
    }


def test_every_documented_command_is_run_by_a_test_or_by_ci() -> None:
    commands = documented_commands()
    assert len(commands) > 50, sorted(commands)  # the extraction finds the pages' commands
    ci_lines = {line.strip() for line in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()}
    uncovered = []
    used: set[str] = set()
    for command, pages in commands.items():
        if command in BY_CI:
            assert BY_CI[command] in ci_lines, (command, "is not a line of .ci/run")
            continue
        if command == SERVER_EXTRA:
            continue  # checked below
        matches = [pattern for pattern, _ in COVERED if re.fullmatch(pattern, command)]
        if matches:
            used.update(matches)
        else:
            uncovered.append(f"{command}  (in {', '.join(pages)})")
    assert not uncovered, "documented commands no test runs:\n" + "\n".join(uncovered)
    stale = [pattern for pattern, _ in COVERED if pattern not in used]
    assert not stale, f"patterns that match no documented command: {stale}"
    tests = defined_tests()
    missing = [name for _, names in COVERED for name in names if name not in tests]
    assert not missing, f"tests named as running documented commands do not exist: {missing}"


def test_the_server_extra_is_what_ci_installs() -> None:
    """The docs' ``pip install -e '.[server]'`` is part of the ``dev`` extra that
    ./scripts/install.sh (run by .ci/run) installs."""
    assert SERVER_EXTRA in documented_commands()
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")  # no tomllib on Python 3.10

    def extra(name: str) -> set[str]:
        body = pyproject.split(f"\n{name} = [", 1)[1].split("\n]", 1)[0]
        return set(re.findall(r'^\s*"([^"]+)"', body, re.M))

    assert extra("server") and extra("server") <= extra("dev")
    assert "-e '.[dev]'" in (ROOT / "scripts" / "install.sh").read_text("utf-8")
    assert "./scripts/install.sh" in (ROOT / ".ci" / "run").read_text("utf-8")


def test_mkdocs_build_strict_is_in_ci_before_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    (build,) = [n for n, line in enumerate(ci) if "mkdocs build --strict" in line]
    (tests,) = [n for n, line in enumerate(ci) if line.strip() == ".venv/bin/python -m pytest"]
    install = ci.index("./scripts/install.sh")
    assert install < build < tests


def _slug(heading: str) -> str:
    """The anchor of a heading, as MkDocs' toc and GitHub make it for these pages."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text("utf-8"), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_the_front_page_is_short_and_its_links_land() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 300
    assert text.index("./scripts/install.sh") < text.index("## ")  # the set-up commands first
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(local) > 20, local
    for link in local:
        target, _, anchor = link.partition("#")
        path = ROOT / target
        assert path.is_file(), link
        if anchor:
            assert anchor in _anchors(path), link
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images == [
        "docs/images/report.png",
        "docs/images/console.png",
    ]  # the report, the console
    for image in images:
        assert (ROOT / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_page_is_in_the_nav() -> None:
    """mkdocs.yml's nav names every page under docs/ (a page left out is found by no reader)."""
    nav = (ROOT / "mkdocs.yml").read_text("utf-8").split("\nnav:", 1)[1]
    named = set(re.findall(r"^\s*-[^#\n]*:\s*(\S+\.md)\s*$", nav, re.M))  # not the comments
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages == named
