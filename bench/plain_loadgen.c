/* plain_loadgen: a plain beanstalkd-protocol load generator, the kind any
 * user would write, to check that delayqd's figures hold for a client not
 * tuned to it (docs/benchmarks.md, "Two load generators"). C, one epoll loop
 * per thread over non-blocking sockets; each loop sleeps in epoll_wait and
 * never polls. 64-byte bodies by default.
 *
 *   plain_loadgen --port P [--host 127.0.0.1] [--mode lifecycle|put|pipeline]
 *                 [--connections N] [--pipeline-depth D] [--threads T]
 *                 [--seconds S] [--warmup W] [--tube NAME] [--body-size B]
 *
 * Modes, per connection:
 *   lifecycle  put, then reserve, then delete the job reserved; one request
 *              in flight
 *   put        put after put, one in flight
 *   pipeline   D puts in flight, a new one sent for each INSERTED
 * Prints `name: value` lines: jobs_per_s, latency_p50_us and latency_p99_us
 * (per job: from its put's send to its last reply), client_cpu_percent. An
 * unexpected reply ends the run with exit status 1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum mode { LIFECYCLE, PUT, PIPELINE };

static const char *host = "127.0.0.1";
static int port = 0;
static enum mode mode = LIFECYCLE;
static int connections = 1;
static int depth = 64;
static int threads = 1;
static double seconds = 5;
static double warmup = 0.5;
static const char *tube = "bench";
static int body_size = 64;

static int64_t start_ns, measure_from_ns, measure_to_ns;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "plain_loadgen: %s: %s\n", what, errno ? strerror(errno) : "failed");
  exit(1);
}

/* Latencies of measured jobs, in microseconds: a histogram of 1 us bins up
 * to 1 s (later ones in the last bin). */
#define LAT_BINS 1000000
struct stats {
  uint64_t jobs;
  uint32_t *lat;
};

struct conn {
  int fd;
  int setup_replies; /* replies to use/watch/ignore still to come */
  char in[65536];
  size_t in_len;
  char out[1 << 16];
  size_t out_len, out_off;
  int step;              /* lifecycle: 0 put sent, 1 reserve sent, 2 delete sent */
  int in_flight;         /* pipeline: puts not yet answered */
  int64_t sent_ns[1024]; /* pipeline: send times, a ring */
  int head, tail;
};

struct worker {
  pthread_t thread;
  int first, count; /* its connections */
  struct stats st;
};

static char put_cmd[256];
static size_t put_len;

static void queue(struct conn *c, const char *s, size_t n) {
  if (c->out_len + n > sizeof c->out) {
    errno = 0;
    die("output buffer full");
  }
  memcpy(c->out + c->out_len, s, n);
  c->out_len += n;
}

static void flush(struct conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN) return;
      die("send");
    }
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
}

static void count(struct stats *st, int64_t sent, int64_t at) {
  if (at < measure_from_ns || at >= measure_to_ns) return;
  st->jobs++;
  int64_t us = (at - sent) / 1000;
  if (us >= LAT_BINS) us = LAT_BINS - 1;
  st->lat[us]++;
}

static void send_put(struct conn *c) {
  queue(c, put_cmd, put_len);
  if (mode == PIPELINE) {
    c->sent_ns[c->head] = now_ns();
    c->head = (c->head + 1) % 1024;
    c->in_flight++;
  } else {
    c->sent_ns[0] = now_ns();
  }
}

/* One complete reply at the start of c->in: its length, or 0 if more is
 * needed. A RESERVED reply includes its body. */
static size_t reply_length(const struct conn *c) {
  const char *end = memmem(c->in, c->in_len, "\r\n", 2);
  if (end == NULL) return 0;
  size_t line = (size_t)(end - c->in) + 2;
  if (line > 9 && memcmp(c->in, "RESERVED ", 9) == 0) {
    unsigned long long id, bytes;
    if (sscanf(c->in + 9, "%llu %llu", &id, &bytes) != 2) return line;
    size_t total = line + bytes + 2;
    return c->in_len >= total ? total : 0;
  }
  return line;
}

static void unexpected(const char *what, const char *reply, size_t n) {
  fprintf(stderr, "plain_loadgen: unexpected reply to %s: %.*s\n", what, (int)n, reply);
  exit(1);
}

static void on_reply(struct conn *c, const char *r, size_t n, struct stats *st) {
  if (c->setup_replies > 0) {
    if (--c->setup_replies == 0) {
      if (mode == PIPELINE) {
        for (int i = 0; i < depth; i++) send_put(c);
      } else {
        send_put(c);
      }
    }
    return;
  }
  int64_t at = now_ns();
  if (mode == PUT || mode == PIPELINE) {
    if (strncmp(r, "INSERTED ", 9) != 0) unexpected("put", r, n);
    if (mode == PUT) {
      count(st, c->sent_ns[0], at);
    } else {
      count(st, c->sent_ns[c->tail], at);
      c->tail = (c->tail + 1) % 1024;
      c->in_flight--;
    }
    if (at < measure_to_ns) send_put(c);
    return;
  }
  char cmd[64];
  switch (c->step) {
    case 0:
      if (strncmp(r, "INSERTED ", 9) != 0) unexpected("put", r, n);
      queue(c, "reserve\r\n", 9);
      c->step = 1;
      break;
    case 1: {
      unsigned long long id;
      if (strncmp(r, "RESERVED ", 9) != 0 || sscanf(r + 9, "%llu", &id) != 1)
        unexpected("reserve", r, n);
      int len = snprintf(cmd, sizeof cmd, "delete %llu\r\n", id);
      queue(c, cmd, (size_t)len);
      c->step = 2;
      break;
    }
    default:
      if (strncmp(r, "DELETED\r\n", 9) != 0) unexpected("delete", r, n);
      count(st, c->sent_ns[0], at);
      c->step = 0;
      if (at < measure_to_ns) send_put(c);
  }
}

static struct conn *conns;

static void *run_worker(void *arg) {
  struct worker *w = arg;
  int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  for (int i = w->first; i < w->first + w->count; i++) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &conns[i]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0) die("epoll_ctl");
    flush(&conns[i]);
  }
  struct epoll_event events[256];
  for (;;) {
    int64_t now = now_ns();
    if (now >= measure_to_ns) break;
    int timeout_ms = (int)((measure_to_ns - now) / 1000000) + 1;
    int n = epoll_wait(ep, events, 256, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int e = 0; e < n; e++) {
      struct conn *c = events[e].data.ptr;
      if (events[e].events & EPOLLIN) {
        for (;;) {
          ssize_t got = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
          if (got < 0) {
            if (errno == EAGAIN) break;
            die("recv");
          }
          if (got == 0) {
            errno = 0;
            die("the server closed the connection");
          }
          c->in_len += (size_t)got;
          size_t len;
          while ((len = reply_length(c)) > 0) {
            on_reply(c, c->in, len, &w->st);
            memmove(c->in, c->in + len, c->in_len - len);
            c->in_len -= len;
          }
          if (c->in_len == sizeof c->in) {
            errno = 0;
            die("a reply longer than the input buffer");
          }
        }
      }
      flush(c);
    }
  }
  close(ep);
  return NULL;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t percentile(const uint32_t *lat, uint64_t total, double p) {
  uint64_t rank = (uint64_t)((double)total * p), seen = 0;
  for (int i = 0; i < LAT_BINS; i++) {
    seen += lat[i];
    if (seen > rank) return (uint64_t)i;
  }
  return LAT_BINS - 1;
}

static void usage(void) {
  fprintf(stderr,
          "usage: plain_loadgen --port P [--host H] [--mode lifecycle|put|pipeline]\n"
          "       [--connections N] [--pipeline-depth D] [--threads T] [--seconds S]\n"
          "       [--warmup W] [--tube NAME] [--body-size B]\n");
  exit(2);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) usage();
    if (strcmp(a, "--port") == 0) port = atoi(v);
    else if (strcmp(a, "--host") == 0) host = v;
    else if (strcmp(a, "--connections") == 0) connections = atoi(v);
    else if (strcmp(a, "--pipeline-depth") == 0) depth = atoi(v);
    else if (strcmp(a, "--threads") == 0) threads = atoi(v);
    else if (strcmp(a, "--seconds") == 0) seconds = atof(v);
    else if (strcmp(a, "--warmup") == 0) warmup = atof(v);
    else if (strcmp(a, "--tube") == 0) tube = v;
    else if (strcmp(a, "--body-size") == 0) body_size = atoi(v);
    else if (strcmp(a, "--mode") == 0) {
      if (strcmp(v, "lifecycle") == 0) mode = LIFECYCLE;
      else if (strcmp(v, "put") == 0) mode = PUT;
      else if (strcmp(v, "pipeline") == 0) mode = PIPELINE;
      else usage();
    } else {
      usage();
    }
    i++;
  }
  if (port <= 0 || connections < 1 || threads < 1 || depth < 1 || depth > 512 || body_size < 0 ||
      body_size > 100 || seconds <= 0)
    usage();
  if (threads > connections) threads = connections;

  int len = snprintf(put_cmd, sizeof put_cmd, "put 1024 0 60 %d\r\n", body_size);
  memset(put_cmd + len, 'x', (size_t)body_size);
  memcpy(put_cmd + len + body_size, "\r\n", 2);
  put_len = (size_t)len + (size_t)body_size + 2;

  conns = calloc((size_t)connections, sizeof *conns);
  if (conns == NULL) die("calloc");
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) die("--host");
  char setup[512];
  int setup_len = snprintf(setup, sizeof setup, "use %s\r\nwatch %s\r\nignore default\r\n", tube, tube);
  for (int i = 0; i < connections; i++) {
    struct conn *c = &conns[i];
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) die("socket");
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0) die("O_NONBLOCK");
    c->setup_replies = 3;
    queue(c, setup, (size_t)setup_len);
  }

  start_ns = now_ns();
  measure_from_ns = start_ns + (int64_t)(warmup * 1e9);
  measure_to_ns = measure_from_ns + (int64_t)(seconds * 1e9);
  double cpu0 = cpu_seconds();
  struct worker *ws = calloc((size_t)threads, sizeof *ws);
  if (ws == NULL) die("calloc");
  int per = connections / threads, extra = connections % threads, next = 0;
  for (int t = 0; t < threads; t++) {
    ws[t].first = next;
    ws[t].count = per + (t < extra ? 1 : 0);
    next += ws[t].count;
    ws[t].st.lat = calloc(LAT_BINS, sizeof(uint32_t));
    if (ws[t].st.lat == NULL) die("calloc");
    if (pthread_create(&ws[t].thread, NULL, run_worker, &ws[t]) != 0) die("pthread_create");
  }
  uint64_t jobs = 0;
  uint32_t *lat = calloc(LAT_BINS, sizeof(uint32_t));
  if (lat == NULL) die("calloc");
  for (int t = 0; t < threads; t++) {
    pthread_join(ws[t].thread, NULL);
    jobs += ws[t].st.jobs;
    for (int i = 0; i < LAT_BINS; i++) lat[i] += ws[t].st.lat[i];
  }
  double cpu = cpu_seconds() - cpu0;
  double wall = (double)(now_ns() - start_ns) / 1e9;
  printf("jobs_per_s: %.0f\n", (double)jobs / seconds);
  printf("latency_p50_us: %llu\n", (unsigned long long)percentile(lat, jobs, 0.50));
  printf("latency_p99_us: %llu\n", (unsigned long long)percentile(lat, jobs, 0.99));
  printf("client_cpu_percent: %.0f\n", 100 * cpu / wall);
  return jobs > 0 ? 0 : 1;
}
