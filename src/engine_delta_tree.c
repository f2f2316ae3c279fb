/* SPDX-License-Identifier: MIT */
/*
 * --delta onto a block device, checked by chunk digests (DELTA SUMS' TREE,
 * PROTO_CAP_DELTA_TREE). The receiver keeps the digest of each chunk its
 * digest pass read (rd, rdisk) and replaces it as chunks arrive (their own
 * bytes' digest) or become zeros; at the commit only the chunks written
 * after the pass are read back from the device (tree_verify). The sender
 * digests its source beside that pass (tx_delta_prehash), sends the run of
 * chunks both have alike as SAME without reading it again, and feeds each
 * chunk's digest, in file order, into the file's: the XXH3-128 of its
 * chunks' digests, which FILE_DONE carries and the receiver matches.
 */
#include "engine_delta.h"
#include "engine_partial.h"

/*
 * Receiver, a tree file (f->tree), at g's turn in file order: the device
 * holds those chunks as the digest pass read them, so their digests are
 * the pass's (rd) and nothing is read back. With --partial each is
 * journaled with that digest.
 */
static void rx_tree_same(struct engine *e, struct efile *f, const struct proto_range *g)
{
	const struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size;

	for (uint64_t off = g->offset; off < g->offset + g->len; off += cs) {
		engine_rx_written(e, f, off, (uint32_t)MIN(cs, f->size - off),
				  rx_partial_journaled(e, f) ? df->rd[off / cs] : NULL);
	}
}

/*
 * Receiver, a tree file: zeros at [off, off + len) (whole chunks, or to the
 * file's end). Chunks the digest pass read as zeros were not written again
 * (rx_zeros_mapped): they stay the pass's; the others are zeros now, or
 * will be read back as such at the commit (written, or assumed).
 */
static void rx_tree_zeros(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size;

	for (uint64_t at = off; at < off + len; at += cs) {
		uint64_t i = at / cs;

		if (!(i < df->ndsum && bit_get(df->dzero, i) && bit_get(df->rdisk, i))) {
			zero_digest(e, MIN(cs, f->size - at), df->rd[i]);
			bit_set(df->rdisk, i, false);
		}
	}
}

/* Receiver, a tree file: chunk at off arrived with this digest (its own bytes'). */
static void rx_tree_chunk(struct engine *e, struct efile *f, uint64_t off,
			  const uint8_t d[HASH_LEN])
{
	struct delta_file *df = delta_file(e, f);
	uint64_t i = off / e->p->chunk_size;

	memcpy(df->rd[i], d, HASH_LEN);
	bit_set(df->rdisk, i, false);
}

/* A tree's digest: the XXH3-128 of n chunk digests in order. */
static void tree_digest(uint8_t (*rd)[HASH_LEN], uint64_t n, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(rd, (size_t)n * HASH_LEN));
	memcpy(out, c.digest, HASH_LEN);
}

/* Receiver, a tree file with every chunk accounted for: its digest, to match FILE_DONE's. */
static void rx_tree_digest(struct engine *e, struct efile *f, uint8_t out[HASH_LEN])
{
	tree_digest(delta_file(e, f)->rd, delta_chunks(e, f->size), out);
}

/*
 * On the hashing thread, after the device's fsync and with its cached
 * pages dropped: the chunks written since the digest pass read back from
 * the device and hashed, the others taken as that pass read them, into
 * the tree's digest (rx_device_verified matches it to FILE_DONE's). rd and
 * rdisk are the job's own copies.
 */
static int tree_verify(int fd, uint64_t size, uint32_t cs, uint8_t (*rd)[HASH_LEN],
		       const uint8_t *rdisk, uint8_t out[HASH_LEN])
{
	uint64_t n = size / cs + (size % cs != 0);
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_close_ int dfd = -1;
	char proc[64];
	void *p;

	if (posix_memalign(&p, 4096, cs) != 0) {
		return -ENOMEM;
	}
	buf = p;
	/* From the device itself, not a cache, and no more than asked (no read-ahead). */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
	for (uint64_t i = 0; i < n; i++) {
		size_t want = (size_t)MIN((uint64_t)cs, size - i * cs);
		ssize_t got;

		if (bit_get(rdisk, i)) {
			continue;
		}
		got = -1;
		if (dfd >= 0 && want % 4096 == 0 && cs % 4096 == 0) {
			got = pread(dfd, buf, want, (off_t)(i * cs));
		}
		if (got != (ssize_t)want) {
			got = pread(fd, buf, want, (off_t)(i * cs));
		}
		if (got < 0) {
			return negerrno();
		}
		if (got != (ssize_t)want) {
			return -EIO;
		}
		delta_digest(buf, want, rd[i]);
	}
	tree_digest(rd, n, out);
	return 0;
}

int delta_tree_read_back(struct engine *e, struct efile *f, int fd, sum_done_fn done)
{
	const struct delta_file *df = delta_file(e, f);

	return sums_queue_tree(e, f, fd, (const uint8_t(*)[HASH_LEN])df->rd, df->rdisk, tree_verify,
			       done);
}

/*
 * Sender, a tree file: from read_off (a chunk's start), the bytes of the
 * run of chunks whose pre-pass digest is the receiver's: unchanged, they
 * need no read (at most ZERO_CHUNK_MAX at a time). 0: read the next one.
 * With zero extents the run stops where the source's next hole has whole
 * chunks (tx_hole_at's f->next_hole): a hole goes as zeros, as ever.
 */
static uint64_t tx_tree_same_at(const struct engine *e, const struct efile *f, bool holes)
{
	const struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size, off = f->read_off, end = f->size;

	if (off % cs) {
		return 0;
	}
	if (holes && f->next_hole > off) {
		end = MIN(end, (f->next_hole + cs - 1) / cs * cs);
	}
	for (uint64_t i = off / cs; off < end && off - f->read_off < ZERO_CHUNK_MAX; i++) {
		if (i >= df->prehashed || i >= df->ndsum ||
		    memcmp(df->mine[i], df->dsum[i], HASH_LEN) != 0) {
			break;
		}
		off = MIN(off + cs, f->size);
	}
	return off - f->read_off;
}

/*
 * Sender, a tree file: chunk c, next in file order, into the digest of its
 * chunks' digests: a same run by the pre-pass's digests, zeros by theirs,
 * data (buf) by its own, which must be the pre-pass's where there is one
 * (else the source changed: the file fails). True: data the receiver has
 * unchanged (a SAME range, not posted).
 */
static bool tx_tree_feed(struct engine *e, struct efile *f, const struct chunk *c, const void *buf)
{
	const struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size, i = c->off / cs;
	uint8_t d[HASH_LEN];

	if (c->same || c->zero) {
		for (uint64_t off = c->off; off < c->off + c->len; off += cs, i++) {
			if (c->same) {
				memcpy(d, df->mine[i], HASH_LEN);
			} else {
				zero_digest(e, MIN(cs, f->size - off), d);
			}
			XXH3_128bits_update(df->tst, d, HASH_LEN);
		}
		return c->same;
	}
	delta_digest(buf, c->len, d);
	XXH3_128bits_update(df->tst, d, HASH_LEN);
	if (i < df->prehashed && memcmp(d, df->mine[i], HASH_LEN) != 0) {
		file_fail(f, PERR_SOURCE_CHANGED, "changed while being sent (chunk at %llu)",
			  (unsigned long long)c->off);
		return false;
	}
	return c->off % cs == 0 && c->len == MIN(cs, f->size - c->off) && i < df->ndsum &&
	       memcmp(d, df->dsum[i], HASH_LEN) == 0;
}

/* Sender, a tree file with every chunk fed: FILE_DONE's digest. */
static void tx_tree_final(struct engine *e, struct efile *f, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(delta_file(e, f)->tst));
	memcpy(out, c.digest, HASH_LEN);
}

/* --delta with chunk digests: the file's digest is its chunks'. */
const struct engine_digest delta_tree_digest = {
	.rx_same = rx_tree_same,
	.rx_zeros = rx_tree_zeros,
	.rx_chunk = rx_tree_chunk,
	.rx_final = rx_tree_digest,
	.tx_same_at = tx_tree_same_at,
	.tx_feed = tx_tree_feed,
	.tx_final = tx_tree_final,
};
