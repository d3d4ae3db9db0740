"""tumblerd driven by the stock redis-cli (RESP2 and, with -3, RESP3)."""

import re
import shutil
import subprocess
import unittest

from harness import LockTestMixin, SharedServerTestCase, inspect_lock

REDIS_CLI = shutil.which("redis-cli")


def cli_supports_resp3():
    if not REDIS_CLI:
        return False
    out = subprocess.run([REDIS_CLI, "--help"], capture_output=True, text=True, timeout=10)
    return re.search(r"^\s*-3\s", out.stdout + out.stderr, re.M) is not None


@unittest.skipUnless(REDIS_CLI, "redis-cli not installed")
class RedisCliTest(SharedServerTestCase, LockTestMixin):
    SERVER_KW = {}

    def cli(self, *args, opts=(), stdin=None):
        cmd = [REDIS_CLI, "-h", "127.0.0.1", "-p", str(self.server.port)] + list(opts) + \
            [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10, input=stdin)
        self.assertEqual(p.stderr.strip(), "", "redis-cli stderr for %r" % (cmd,))
        return p.stdout

    def test_raw_output(self):
        self.assertEqual(self.cli("PING"), "PONG\n")
        out = self.cli("SESSION", "OPEN", 60000)
        self.assertRegex(out, r"^\d+\n$")
        sid = int(out)
        n = self.name("raw")
        out = self.cli("LOCK", n, sid)
        m = re.fullmatch(r"(\d+)\n1\n", out)
        self.assertTrue(m, "LOCK printed %r" % out)
        tok = int(m.group(1))
        self.assertEqual(self.cli("CHECK", n, tok), "1\n")
        out = self.cli("INSPECT", n)
        lines = out.splitlines()
        self.assertIn("name", lines)
        self.assertIn(n, lines)
        self.assertIn("exclusive", lines)
        self.assertIn(str(tok), lines)
        self.assertEqual(self.cli("UNLOCK", n, sid), "0\n")
        out = self.cli("INFO")
        self.assertIn("role:leader", out)

    def test_formatted_output(self):
        out = self.cli("SESSION", "OPEN", 60000, "NAME", "cli", opts=["--no-raw"])
        m = re.fullmatch(r"\(integer\) (\d+)\n", out)
        self.assertTrue(m, out)
        sid = int(m.group(1))
        other = self.open_session()
        n = self.name("fmt")
        out = self.cli("LOCK", n, sid, "OWNER", "me", opts=["--no-raw"])
        m = re.fullmatch(r"1\) \(integer\) (\d+)\n2\) \(integer\) 1\n", out)
        self.assertTrue(m, "LOCK printed %r" % out)
        tok = int(m.group(1))
        # the same holder again from another redis-cli process: reentrant
        out = self.cli("LOCK", n, sid, "OWNER", "me", opts=["--no-raw"])
        self.assertEqual(out, "1) (integer) %d\n2) (integer) 2\n" % tok)
        out = self.cli("LOCK", n, other, opts=["--no-raw"])
        self.assertEqual(out, "(nil)\n")
        out = self.cli("INSPECT", n, opts=["--no-raw"])
        self.assertIn('"name"', out)
        self.assertIn('"%s"' % n, out)
        self.assertIn('"exclusive"', out)
        self.assertIn('"holders"', out)
        self.assertIn('(integer) %d' % sid, out)
        self.assertIn('"me"', out)
        self.assertEqual(self.cli("UNLOCK", n, sid, "OWNER", "me", opts=["--no-raw"]), "(integer) 1\n")
        self.assertEqual(self.cli("UNLOCK", n, sid, "OWNER", "me", opts=["--no-raw"]), "(integer) 0\n")
        out = self.cli("UNLOCK", n, sid, "OWNER", "me", opts=["--no-raw"])
        self.assertTrue(out.startswith("(error) NOTHELD"), out)
        out = self.cli("SESSION", "INFO", sid, opts=["--no-raw"])
        self.assertIn('"cli"', out)
        self.assertIn('"ttl_ms"', out)
        self.assertIn("(integer) 60000", out)
        out = self.cli("INFO", opts=["--no-raw"])
        self.assertIn("role:leader", out)

    @unittest.skipUnless(cli_supports_resp3(), "redis-cli without -3")
    def test_resp3(self):
        out = self.cli("HELLO", "3", opts=["-3", "--no-raw"])
        self.assertRegex(out, r'"proto" => \(integer\) 3')
        out = self.cli("SESSION", "OPEN", 60000, opts=["-3", "--no-raw"])
        sid = int(re.fullmatch(r"\(integer\) (\d+)\n", out).group(1))
        n = self.name("r3")
        out = self.cli("LOCK", n, sid, "SHARED", opts=["-3", "--no-raw"])
        m = re.fullmatch(r"1\) \(integer\) (\d+)\n2\) \(integer\) 1\n", out)
        self.assertTrue(m, out)
        out = self.cli("INSPECT", n, opts=["-3", "--no-raw"])
        self.assertRegex(out, r'1# "name" => "%s"' % re.escape(n))
        self.assertRegex(out, r'"mode" => "shared"')
        out = self.cli("SESSION", "INFO", sid, opts=["-3", "--no-raw"])
        self.assertRegex(out, r'"id" => \(integer\) %d' % sid)
        other = self.open_session()
        out = self.cli("LOCK", n, other, opts=["-3", "--no-raw"])
        self.assertEqual(out, "(nil)\n")
        self.assertEqual(self.cli("UNLOCK", n, sid, opts=["-3", "--no-raw"]), "(integer) 0\n")
        out = self.cli("INFO", opts=["-3"])
        self.assertIn("role:leader", out)

    def test_stdin_pipe(self):
        n = self.name("pipe")
        sid = self.open_session()
        out = self.cli(opts=["--no-raw"], stdin="PING\nLOCK %s %d\nINSPECT %s\nUNLOCK %s %d\n"
                       % (n, sid, n, n, sid))
        self.assertTrue(out.startswith("PONG\n"), out)
        self.assertRegex(out, r"1\) \(integer\) \d+\n2\) \(integer\) 1\n")
        self.assertTrue(out.rstrip().endswith("(integer) 0"), out)
        self.assertEqual(inspect_lock(self.c, n)["mode"], "free")

    def test_errors_printed(self):
        out = self.cli("UNLOCK", self.name("x"), 987654321, opts=["--no-raw"])
        self.assertTrue(out.startswith("(error) NOSESSION"), out)
        out = self.cli("SESSION", "OPEN", 99, opts=["--no-raw"])
        self.assertTrue(out.startswith("(error) ERR"), out)
        out = self.cli("NOSUCHCOMMAND", opts=["--no-raw"])
        self.assertTrue(out.startswith("(error) ERR"), out)


@unittest.skipUnless(REDIS_CLI, "redis-cli not installed")
class RedisCliAuthTest(SharedServerTestCase):
    SERVER_KW = {"requirepass": "pw-123"}

    def test_auth(self):
        base = [REDIS_CLI, "-h", "127.0.0.1", "-p", str(self.server.port), "--no-raw"]
        p = subprocess.run(base + ["SESSION", "OPEN", "1000"], capture_output=True, text=True, timeout=10)
        self.assertTrue(p.stdout.startswith("(error) NOAUTH"), p.stdout)
        p = subprocess.run(base + ["-a", "pw-123", "--no-auth-warning", "SESSION", "OPEN", "1000"],
                           capture_output=True, text=True, timeout=10)
        self.assertRegex(p.stdout, r"^\(integer\) \d+\n$")
        p = subprocess.run(base + ["-a", "bad", "--no-auth-warning", "PING"],
                           capture_output=True, text=True, timeout=10)
        self.assertIn("WRONGPASS", p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
