#!/usr/bin/env bash
# Install everything vnc-use needs on a Debian/Ubuntu machine: the system packages (a VNC
# server, X clients and Tk for the test desktop) and the package itself, with its development
# tools, in a virtual environment at .venv.
#   ./scripts/install.sh            (uses sudo for apt-get when not root)
#   PYTHON=python3.12 ./scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  tigervnc-standalone-server  # Xvnc: the test desktop
  tigervnc-tools              # vncpasswd
  xterm                       # a terminal the end-to-end tests type into
  x11-utils                   # xdpyinfo, xwininfo: look at a desktop
  fonts-dejavu-core           # a font for Tk and xterm
  python3-tk                  # Tk, for the probe app and the calibration window (vnc-use calibrate)
  openbox                     # the local desktop's window manager (vnc-use desktop up)
  x11-xserver-utils           # xsetroot: the local desktop's background colour; xrandr: resize tests
  x11vnc                      # the other common VNC server: compatibility, -ncache, --screen-region
  xvfb                        # Xvfb, the screen x11vnc shares
  novnc                       # the live view's web client, /usr/share/novnc (vnc-use view)
  chromium                    # headless: the tests load the run report as a person would see it
  sway                        # headless Wayland desktop for the wayvnc tests (runs as a non-root user)
  wayvnc                      # the Wayland VNC server tested with and without its password
  foot                        # a Wayland terminal the wayvnc tests type into
  postgresql                  # the Postgres checkpointer tests start a throw-away cluster (initdb, postgres)
  freerdp2-x11                # xfreerdp: the RDP bridge of --rdp (Windows and other RDP desktops)
  freerdp2-shadow-x11         # freerdp-shadow-cli: the RDP server the --rdp tests connect to
  winpr-utils                 # winpr-hash: the NLA password file of that test server
  xrdp                        # the RDP server without NLA the --rdp tests also run (vnc_use.testing.xrdp)
  xorgxrdp                    # xrdp's Xorg session (the probe app runs in it)
  xclip                       # --rdp-paste-text: the bridge's clipboard; the xrdp tests read the session's
  python3-venv
)

if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
else
  echo "install.sh: no apt-get here; install these yourself: ${APT_PACKAGES[*]}" >&2
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/python -c "import tkinter, vnc_use; print('vnc-use', vnc_use.__version__, 'installed in .venv')"
