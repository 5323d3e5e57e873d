/*
 * Intentionally empty. librdkafka 2.12's CMake build writes `#define WITH_OAUTHBEARER_OIDC 0`
 * (`#cmakedefine01`) and `rdkafka_conf.c` tests it with `#ifdef`, so it includes <curl/curl.h>
 * even when built without curl, as `openqq-adapters` builds it. Native builds find the system's
 * header (libcurl4-openssl-dev); the Lambda cross build (cargo-lambda's zig toolchain) searches
 * only zig's own libc headers, so scripts/lambda-build.sh passes this one in the target's CFLAGS.
 * Nothing from curl is used or linked.
 */
