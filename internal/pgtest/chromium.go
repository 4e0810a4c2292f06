package pgtest

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Chromium returns the path of Debian's headless-capable chromium. Outside
// CI a missing chromium skips the test with the command that installs it;
// under CI=true (or CI=1) it fails, as a missing PostgreSQL does.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	const reason = "chromium is not installed: apt-get install -y chromium (as root), or run `make test`, which installs it"
	if InCI() {
		t.Fatalf("CI is set and %s", reason)
	}
	t.Skip(reason)
	return ""
}

// chromiumArgs are the flags of every headless run: no sandbox (tests may
// run as root), no GPU, no network beyond the page, a throwaway profile.
func chromiumArgs(profile string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile}
}

// ChromiumPage loads url in headless chromium and returns the rendered DOM
// (--dump-dom) and a screenshot (PNG bytes) of a width×height window.
func ChromiumPage(t testing.TB, url string, width, height int) (dom string, screenshot []byte) {
	t.Helper()
	bin := Chromium(t)
	dir := t.TempDir()
	run := func(extra ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append(chromiumArgs(filepath.Join(dir, "profile")), extra...)
		cmd := exec.CommandContext(ctx, bin, append(args, url)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
		}
		return stdout.Bytes()
	}
	dom = string(run("--dump-dom"))
	shot := filepath.Join(dir, "page.png")
	run("--screenshot="+shot, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--hide-scrollbars")
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	return dom, b
}

// Colours counts the distinct colours of a PNG and checks its size: a blank
// or failed page has one or two.
func Colours(t testing.TB, pngBytes []byte, width, height int) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	return distinct(img)
}

func distinct(img image.Image) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	return len(seen)
}
