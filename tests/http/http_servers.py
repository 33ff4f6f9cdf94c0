"""Servers for the HTTP/S3 tier's tests, each on a free loopback port in a
directory of its own, and always stopped (use them in a `with`):

  Nginx(dir, tls=None)   nginx from Debian as a WebDAV store (PUT, DELETE,
                         a JSON autoindex for listing), over HTTP, or HTTPS
                         with tls=(cert, key)
  make_ca(dir, name)     a certificate authority and a server certificate
                         for 127.0.0.1 made with openssl: (ca, cert, key)
  BadServer()            a real socket server that misbehaves by path:
                         /drip/ /lie-short/ /lie-long/ /huge/ /nolen/ /500/
                         /redirect/ /hang/
  Moto(dir, python)      moto's S3 server with authentication enforced and
                         an IAM user: .url, .key_id, .secret, bucket "kernels"
"""

import os
import shutil
import socket
import socketserver
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("%s did not listen on %d" % (what, port))


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
{user}
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  client_max_body_size 64m;
  server {{
    listen 127.0.0.1:{port}{ssl};
    {tls}
    root {d}/www;
    location /cache/ {{
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw;
      autoindex on;
      autoindex_format json;
    }}
    location /moved/ {{ return 302 /cache/; }}
  }}
}}
"""


class Nginx:
    def __init__(self, d, tls=None):
        self.dir = d
        self.port = free_port()
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(d, "www", "cache"), exist_ok=True)
        tls_conf = ""
        if tls:
            tls_conf = "ssl_certificate %s; ssl_certificate_key %s;" % tls
        user = "user root root;" if os.geteuid() == 0 else ""
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(d=d, port=self.port, ssl=" ssl" if tls else "",
                                      tls=tls_conf, user=user))
        scheme = "https" if tls else "http"
        self.url = "%s://127.0.0.1:%d/cache/" % (scheme, self.port)
        self.proc = None

    def __enter__(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-p", self.dir, "-c",
                                      os.path.join(self.dir, "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(self.port, self.proc, "nginx")
        except Exception:
            stop(self.proc)
            raise
        return self

    def __exit__(self, *exc):
        stop(self.proc)


def make_ca(d, name):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    os.makedirs(d, exist_ok=True)
    ca, ca_key = os.path.join(d, name + "-ca.pem"), os.path.join(d, name + "-ca.key")
    cert, key = os.path.join(d, name + "-cert.pem"), os.path.join(d, name + "-cert.key")
    csr, ext = os.path.join(d, name + ".csr"), os.path.join(d, name + ".ext")
    run = lambda *a: subprocess.run(["openssl"] + list(a), check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        "/CN=progcache test CA " + name, "-keyout", ca_key, "-out", ca)
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key,
        "-out", csr)
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days",
        "2", "-extfile", ext, "-out", cert)
    return ca, cert, key


class _Bad(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.settimeout(30)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        path = data.split(b" ", 2)[1].decode()
        try:
            self.answer(sock, path)
        except OSError:
            pass

    def answer(self, sock, path):
        head = "HTTP/1.1 %s\r\nConnection: close\r\n"
        if path.startswith("/drip/"):
            sock.sendall((head % "200 OK" + "Content-Length: 100000\r\n\r\n").encode())
            for _ in range(200):
                sock.sendall(b"x")
                time.sleep(0.2)
        elif path.startswith("/lie-short/"):  # says 5000, sends 100, closes
            sock.sendall((head % "200 OK" + "Content-Length: 5000\r\n\r\n").encode() +
                         b"y" * 100)
        elif path.startswith("/lie-long/"):  # says 30, sends 100000
            sock.sendall((head % "200 OK" + "Content-Length: 30\r\n\r\n").encode() +
                         b"z" * 100000)
        elif path.startswith("/huge/"):  # announces 1 GB
            sock.sendall((head % "200 OK" + "Content-Length: 1000000000\r\n\r\n").encode())
            sock.sendall(b"h" * 65536)
        elif path.startswith("/nolen/"):  # no length, 8 MiB
            sock.sendall((head % "200 OK" + "\r\n").encode())
            for _ in range(128):
                sock.sendall(b"n" * 65536)
        elif path.startswith("/500/"):
            sock.sendall((head % "500 Internal Server Error" +
                          "Content-Length: 5\r\n\r\nerror").encode())
        elif path.startswith("/redirect/"):
            sock.sendall((head % "302 Found" + "Location: http://127.0.0.1:1/x\r\n"
                          "Content-Length: 0\r\n\r\n").encode())
        elif path.startswith("/hang/"):
            time.sleep(20)
        else:
            sock.sendall((head % "404 Not Found" + "Content-Length: 0\r\n\r\n").encode())


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class BadServer:
    def __enter__(self):
        self.server = _Server(("127.0.0.1", 0), _Bad)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def url(self, mode, timeout_ms=300):
        return "http://127.0.0.1:%d/%s/?timeout_ms=%d" % (self.port, mode, timeout_ms)

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


MOTO_SETUP = r"""
import sys, boto3
url = sys.argv[1]
iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1",
                   aws_access_key_id="setup", aws_secret_access_key="setup")
iam.create_user(UserName="progcache")
iam.put_user_policy(UserName="progcache", PolicyName="all", PolicyDocument=
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}')
k = iam.create_access_key(UserName="progcache")["AccessKey"]
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                  aws_access_key_id=k["AccessKeyId"], aws_secret_access_key=k["SecretAccessKey"])
s3.create_bucket(Bucket="kernels")
print(k["AccessKeyId"], k["SecretAccessKey"])
"""


class Moto:
    """moto_server; the first 3 actions (the IAM user, its policy, its key)
    are not authenticated, every later one is (SigV4 checked)."""

    def __init__(self, d, python):
        self.dir, self.python = d, python
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def __enter__(self):
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
        for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                  "AWS_PROFILE"):
            env.pop(v, None)
        server = os.path.join(os.path.dirname(self.python), "moto_server")
        self.log = open(os.path.join(self.dir, "moto.log"), "w")
        self.proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(self.port)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc, "moto_server", 60)
            out = subprocess.run([self.python, "-c", MOTO_SETUP, self.url], check=True,
                                 capture_output=True, text=True, timeout=120).stdout
            self.key_id, self.secret = out.split()
        except Exception:
            stop(self.proc)
            self.log.close()
            raise
        return self

    def __exit__(self, *exc):
        stop(self.proc)
        self.log.close()
