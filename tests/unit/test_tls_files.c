/* SPDX-License-Identifier: MIT */
/*
 * TLS contexts refused at load (a key that does not match, a missing or junk
 * file) and certificate fingerprints: parsed, formatted, taken from a file
 * (tls_harness.c).
 */
#include "testutil.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "tls.h"
#include "tls_harness.h"

static void test_ctx_errors(void **state)
{
	char crt[256], key[256], ca[256], junk[256];
	struct tls_config cfg = {
		.server = true, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;
	FILE *f;

	snprintf(crt, sizeof(crt), "%s/server.crt", dir_a);
	snprintf(key, sizeof(key), "%s/client.key", dir_a); /* wrong key */
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir_a);
	snprintf(junk, sizeof(junk), "%s/junk.pem", tmpdir);
	f = fopen(junk, "w");
	fputs("not a certificate\n", f);
	fclose(f);

	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	assert_contains(tls_last_error(), "mismatch");
	snprintf(key, sizeof(key), "%s/server.key", dir_a);
	cfg.ca_file = "/nonexistent/ca.crt";
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -ENOENT);
	assert_contains(tls_last_error(), "/nonexistent/ca.crt");
	cfg.ca_file = junk;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	cfg.ca_file = ca;
	cfg.cert_file = junk;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	cfg.cert_file = NULL;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	assert_null(ctx);
}

static void test_fingerprints(void **state)
{
	static const char hex[] =
	    "00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978";
	static const char *const bad[] = {
		"",
		"sha256:",
		"00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a697",   /* 63 */
		"00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a69780", /* 65 */
		"g0112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		" 00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a697",
		"sha1:00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		"sha256:sha256:00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		"001:12233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		":00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:69:7",
		"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:69:78:",
		"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:6978",
	};
	uint8_t fp[TLS_FINGERPRINT_LEN], fp2[TLS_FINGERPRINT_LEN], orig[TLS_FINGERPRINT_LEN];
	char out[65], *p;
	X509 *x;
	FILE *f;
	unsigned int n;

	assert_int_equal(tls_parse_fingerprint(hex, fp), 0);
	assert_int_equal(fp[0], 0x00);
	assert_int_equal(fp[10], 0xaa);
	assert_int_equal(fp[31], 0x78);
	tls_format_fingerprint(fp, out);
	assert_string_equal(out, hex);

	assert_int_equal(tls_parse_fingerprint("SHA256:00112233445566778899AABBCCDDEEFF0123456789"
					       "ABCDEF0F1E2D3C4B5A6978",
					       fp2),
			 0);
	assert_memory_equal(fp, fp2, sizeof(fp));
	memset(fp2, 0, sizeof(fp2));
	assert_int_equal(tls_parse_fingerprint("sha256:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:"
					       "ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:3c:4b:5a:"
					       "69:78",
					       fp2),
			 0);
	assert_memory_equal(fp, fp2, sizeof(fp));

	memcpy(orig, fp, sizeof(fp));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (tls_parse_fingerprint(bad[i], fp) != -EINVAL) {
			fail_msg("accepted '%s'", bad[i]);
		}
	}
	assert_int_equal(tls_parse_fingerprint(NULL, fp), -EINVAL);
	/* Output untouched on failure. */
	assert_memory_equal(fp, orig, sizeof(fp));

	/* File fingerprint = SHA-256 over the DER. */
	p = path_in(dir_a, "server.crt");
	f = fopen(p, "r");
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_int_equal(X509_digest(x, EVP_sha256(), fp, &n), 1);
	X509_free(x);
	assert_int_equal(tls_file_fingerprint(p, fp2), 0);
	assert_memory_equal(fp, fp2, sizeof(fp));
	free(p);
	assert_int_equal(tls_file_fingerprint("/nonexistent.crt", fp2), -ENOENT);
	p = path_in(dir_a, "server.key");
	assert_int_equal(tls_file_fingerprint(p, fp2), -EINVAL);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctx_errors),
		cmocka_unit_test(test_fingerprints),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
