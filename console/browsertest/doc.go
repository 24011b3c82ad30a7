// Package browsertest tests the console (package console) in a real browser:
// headless Chromium, driven by chromedp over the DevTools protocol, against a real
// kernel on a real MariaDB. It has no non-test code; it is a module of its own so
// that the core module gains no dependency on a browser driver.
//
// The tests need Chromium (scripts/ensure-chromium.sh installs Debian's package;
// `make test` runs it) and the server named by AX_MYSQL_DSN (default
// root@tcp(127.0.0.1:3306)/test; `make db` starts one). AX_CHROMIUM names the
// browser's binary when it is not chromium on the PATH. With -screenshots, the
// tests write a screenshot of each page into docs/console/ of the repository.
package browsertest
