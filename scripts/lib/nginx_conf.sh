# Sourced: nginx_conf DIR PORT ROOT [WORKERS] [LOCATION_BODY] writes DIR/nginx.conf, a
# private static file server: no daemon, pid/logs/temp files under DIR (made here), the
# access log as "METHOD URI STATUS BYTES" in DIR/access.log, listening on 127.0.0.1:PORT,
# serving ROOT as application/octet-stream with sendfile and long keep-alive. LOCATION_BODY
# goes into `location / { }` (e.g. WebDAV PUT). Used by the tests and the benchmarks:
#   nginx_conf "$D" "$PORT" "$ROOT"
#   nginx -p "$D" -c "$D/nginx.conf" -e "$D/error.log" &
nginx_conf() {
  local dir=$1 port=$2 root=$3 workers=${4:-1} loc=${5:-}
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process $([ "$workers" -gt 1 ] && echo on || echo off);
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  types { }
  default_type application/octet-stream;
  log_format lz '\$request_method \$uri \$status \$body_bytes_sent';
  access_log $dir/access.log lz;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  client_max_body_size 0;
  keepalive_requests 100000;
  keepalive_timeout 60;
  sendfile on;
  tcp_nopush on;
  server_tokens off;
  log_not_found off;
  server {
    listen 127.0.0.1:$port;
    root $root;
    location / { $loc }
  }
}
EOF
}
