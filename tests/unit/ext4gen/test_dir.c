/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ext4gen/dir.c and ext4gen/hash.c: the directory name hash against
 * vectors taken from e2fsprogs' debugfs (dx_hash), linear directory blocks, and htrees
 * parsed back the way the kernel and e2fsck read them (index limits and counts, dx_tail
 * and dirent-tail checksums recomputed here, hash ranges, lookups through the index
 * including the collision bit, every entry present exactly once).
 */
#include "../helpers.h"

#include "../../../common/crc32c.h"
#include "../../../common/le.h"
#include "../../../ext4gen/dir.h"
#include "../../../ext4gen/ext4_fs.h"

#define BLK 4096u
#define INO_BASE 1000u

/* ------------------------------------------------------------------ hash vectors */

struct hash_name {
	uint8_t len;
	const char *s;
};

struct hash_vec {
	uint8_t name;         /* index into hv_names */
	uint8_t version;      /* debugfs dx_hash -h N: 0..2 signed chars, 3..5 unsigned */
	uint8_t seed;         /* index into hv_seeds (a UUID given to dx_hash -s) */
	uint32_t major;
	uint32_t minor;
};

/*
 * Collected with e2fsprogs 1.47.0:
 *   debugfs -R "dx_hash -h VERSION -s SEED-UUID NAME" any-ext4.img
 * (the legacy hash ignores the seed, so it is listed with the zero seed only).
 */
static const struct hash_name hv_names[] = {
	{ 1, "a" },
	{ 5, "hello" },
	{ 10, "lost+found" },
	{ 9, "README.md" },
	{ 3, "\xe2\x82\xac" },
	{ 1, "\xff" },
	{ 2, "`\x99" },
	{ 3, "\x99\x85\xba" },
	{ 4, "k\xfb|\xb0" },
	{ 5, "\xe7.\x99\xd2\xc6" },
	{ 15, "\xb3\x8a\xc0oCB\xd8""8{\x3f\xe4!\xfd\xcb\xba" },
	{ 16, "|o\xbcj@\xc8\xd1Zu\xa7""E\xf7\xf6\xf9\x91\xbd" },
	{ 17, "\xf4,\x80\xc3J\xba\xad""8\xb2\xb2\xd0l\xed\xd7\xa6=\xb3" },
	{ 31,
	  "\x9aP%\x97g]\xcf\xb7\x89;\x87R\xf6\xa1\xe5""5\xb0\x8b\xb6wtU=QD\xb4\xfc"
	  "\xbc,$\x9f" },
	{ 32,
	  "\xbdi\xccj\xfa%P\xd9""C\xf4\xcb\xa6\x89""D\xce\xd0\xa6\xf8\x8e\x93\x8d"
	  "\x98}\xbd\xd4\xca\xc7\xb3\x82\xd4\xb1\xc1" },
	{ 33,
	  "\xa8""2\xc3\xf5""2\xf9\x86o\xbb\xfc\xa9\xd9\x96K\xd4o\xdb\xd0\xa4\xd6"
	  "\xfc\x8c&m\xa4\x82\xab\xca\xa1MHy9" },
	{ 64,
	  "njs\x94M\xb5\xbe\x98\xb8O;\x9d\xec""7|=\x89\xd1\xc1\xe5X\xc4""F\xcb@\xc1"
	  "q\x9d\xd0\xb7\x95\xb1\xd5\xe4\xf0\x87.%X\x80IO\x94\xa6\xe5\x83\xefk\xd4"
	  "\xf2""4\xfa\xce\x91\x9f""f5z4\xcam\xd6\xab+" },
	{ 65,
	  "E\xc4""6\xf1<\xbbR\xcf\xb7\xa4uVn\xa6""3\xd9\xb3\xf1yY\xeb\x9b""e\xeb"
	  "\xbb\x89\xe1\xd1\xc9]-k\x88\xc7""f\xa0\x8ap\x94]I)&d\xca\xaeN\xa2\x8e"
	  "\xa7\x8c""6\x98\xa1\x80%\xe6jX\xb6\x90\xa5\xfc\x99\xed" },
	{ 128,
	  "\xaf\xda\x91\x9b\xe9""0\xaa\xc6M\xcako\xe4\xdc\x8b|\x80\xed\xfcyNQ\xf2"
	  "5\xf6y\xb9\xff\x80\x86""FS\x93\x99\x85\xeb\xf0\xc2\xf8nC\xf4\xa5""4\xc1"
	  "\xac\xa2Hy\xdb\xe9\xd2\xee\x9a\xf6\xa0\xc8\x82\x86Z\xa9\x9d%\xd6\xeaI"
	  "\xd6\xe5\xa5I`c6\xdf\xf8\xbau\xa4\xb5\xd0v\xec\xc8\xbc\xd2\xaa""8l\xe2"
	  "\xcb\xe1\x3f\xe3t\xd4X;\x88\xd0\xb8!(\x9c\x99\x92\x92\xc8\xca,\xfeu\x9fR"
	  "B\xfd\xc8\xd1Ss\xa3\x87Rr\xd3-\x8d\xc0\xd0" },
	{ 200,
	  "\x97I\xdb\xf0\xc4\xeaQJ\xddK$\xb7&\x93\xa5\xaf\xd6;\xbdS\xd1Q\x8a\x9c"
	  "\xc7=|\xfb\xf0\xd5(\xb5\xb1\x85k\xd8""D\xcb\xc4\xb0Q{<\x93\xf7\xe8""E"
	  "\xe9\xee""8\xe3\xce""F`\xf1\x82\xdc\xf8\xf1s[\xf3\xaf\xab\xfd<C\xee""3"
	  "\xa8.\x92\xe0\xbe\x86\x8d\xae\xadG\xf6)G\xda""5\xee\xe1Uk(\x97\xab\xbb"
	  "\xcf\xb0\xd8pd2\xd3\xb4\x82\xdf`\xdet\xd4\xbc\xc9\x88\xe1}J\xca\x99\x86l"
	  "\x93\xf2\xeb\xb7""d\xdc\xbd\x86\xd9\xb6\x9b\xc3\xce\xe2!LM)e\xdb\xe4\x8f"
	  "\x83\x9a\xd2\x3f&\x80\xd9\xe2&U\x83\xd0""d\x94wXH\xff\xf2""7\x86\xdc*"
	  "\xbf\xc4p\xd0\xe2\xda(\x9d]^L{CV\xa0\xf5\xc4\xcf\xe5j\xea\x88\xdf\xdb"
	  "\xf6gT\xa3\xfe""77~\xbdo\xe8\xbd""bNV" },
	{ 255,
	  "LI\x88\xc5t){oP\xf6\xeb\xda\xbf\xae\x88""a\xdap%\xd6+\xfb\xe8\xc7\xaf,"
	  "\x86,\xcc\xbbQ\x94T\x92\xa5+\x8a\xc6\xban\xf9\x8f\x9d""3|\x91""8D\xe4"
	  "\xeb\x8b\xf4\xf7\xb1_\x82\xd0:\xa4O\x82\xf9\x91\x95\x81:\x98\x8c""80\xea"
	  "G\xbe\xc4\xd8\xb5\xc3jd\x89\x98\xe4\x86Q\xa9""8\xbe""e\xdb\x95\xbb\xfa"
	  "5=X\xf0\xa3\x97\x8cX\x80\x9bw\xa0\xcf\xce""a\xbe\xf1\xdc\xd6\xf9""CY\xb7"
	  "e\xb0{\x98<ee\xabs\xb4\x82uC\xaf\xa1\xca\xe5""c\xd2\x91h\xec\xf6""Fu&"
	  "\xfa\x8c\xfcz\x86\xd7\xcf\xd8\x9b\x89\xe0\x91\x89\xa4p\xb5\x3f""2\xc2H"
	  "\xc9\xa5""C\xf1\xf2X\x8d\xd7""BE\x8d\x80l\x90""5h\xe4""a\xa2\xe5\xed\xdd"
	  "=\xcaJ|\xd2\xd9\x8b\x8e\xd2R\xe5Zfx\xd7x[6\xf0\xd1\xb0\xd6\xe5\x83\xae}0"
	  "\xb6""6\x9a\xe7\xf3\xeb\xb1O\x92\xe6x\x98\x97\xe7v\xe9\xd6r<0\xa8""C\xb8"
	  "\x8c\xab\xcc\xc6\xc1\xf6\xa8""Bg\xc4\xa0\xf8<Ja\xad\xfe\x8dHPT\xc1" },
};

static const uint8_t hv_seeds[][16] = {
	{ 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 },
	{ 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18,
	  0x29, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90 },
	{ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
};

/* name, hash version (3..5 = unsigned chars), seed, major, minor */
static const struct hash_vec hash_vecs[] = {
	{ 0, 0, 0, 0xe74b53e2, 0x00000000 },
	{ 0, 1, 0, 0xd5fa7d7a, 0xacb48187 },
	{ 0, 1, 1, 0x073bfb0a, 0x7446406e },
	{ 0, 1, 2, 0x504e962e, 0xcf785981 },
	{ 0, 2, 0, 0x6d0ea4c0, 0xc18922df },
	{ 0, 2, 1, 0xc3d656bc, 0x334f477f },
	{ 0, 2, 2, 0x21df54d8, 0x90129126 },
	{ 0, 3, 0, 0xe74b53e2, 0x00000000 },
	{ 0, 4, 0, 0xd5fa7d7a, 0xacb48187 },
	{ 0, 4, 1, 0x073bfb0a, 0x7446406e },
	{ 0, 4, 2, 0x504e962e, 0xcf785981 },
	{ 0, 5, 0, 0x6d0ea4c0, 0xc18922df },
	{ 0, 5, 1, 0xc3d656bc, 0x334f477f },
	{ 0, 5, 2, 0x21df54d8, 0x90129126 },
	{ 1, 0, 0, 0x32252546, 0x00000000 },
	{ 1, 1, 0, 0x1746da32, 0x420013b5 },
	{ 1, 1, 1, 0xb230da8a, 0xd96b22d0 },
	{ 1, 1, 2, 0x1de598cc, 0xbc473861 },
	{ 1, 2, 0, 0x6f5bb1a8, 0x231917c2 },
	{ 1, 2, 1, 0xbdcaa196, 0xf19746ea },
	{ 1, 2, 2, 0x13dfa7f8, 0x84345da3 },
	{ 1, 3, 0, 0x32252546, 0x00000000 },
	{ 1, 4, 0, 0x1746da32, 0x420013b5 },
	{ 1, 4, 1, 0xb230da8a, 0xd96b22d0 },
	{ 1, 4, 2, 0x1de598cc, 0xbc473861 },
	{ 1, 5, 0, 0x6f5bb1a8, 0x231917c2 },
	{ 1, 5, 1, 0xbdcaa196, 0xf19746ea },
	{ 1, 5, 2, 0x13dfa7f8, 0x84345da3 },
	{ 2, 0, 0, 0x5e2aba24, 0x00000000 },
	{ 2, 1, 0, 0x591de422, 0x6ffc56e0 },
	{ 2, 1, 1, 0xcc868838, 0x976aad2b },
	{ 2, 1, 2, 0x304111ec, 0xccbf1eca },
	{ 2, 2, 0, 0x2dbf9e80, 0xbfebee4f },
	{ 2, 2, 1, 0xdce8025a, 0x4be0dc15 },
	{ 2, 2, 2, 0x7b94642a, 0x9496a357 },
	{ 2, 3, 0, 0x5e2aba24, 0x00000000 },
	{ 2, 4, 0, 0x591de422, 0x6ffc56e0 },
	{ 2, 4, 1, 0xcc868838, 0x976aad2b },
	{ 2, 4, 2, 0x304111ec, 0xccbf1eca },
	{ 2, 5, 0, 0x2dbf9e80, 0xbfebee4f },
	{ 2, 5, 1, 0xdce8025a, 0x4be0dc15 },
	{ 2, 5, 2, 0x7b94642a, 0x9496a357 },
	{ 3, 0, 0, 0x3f05638c, 0x00000000 },
	{ 3, 1, 0, 0x58ab47a2, 0x08611d5e },
	{ 3, 1, 1, 0x0afc7a3e, 0xc449a5d8 },
	{ 3, 1, 2, 0x35931428, 0x359c75d4 },
	{ 3, 2, 0, 0x0e2301b0, 0x7e54a89f },
	{ 3, 2, 1, 0x29901eda, 0x5ae20257 },
	{ 3, 2, 2, 0xffd156f0, 0xede1f7b5 },
	{ 3, 3, 0, 0x3f05638c, 0x00000000 },
	{ 3, 4, 0, 0x58ab47a2, 0x08611d5e },
	{ 3, 4, 1, 0x0afc7a3e, 0xc449a5d8 },
	{ 3, 4, 2, 0x35931428, 0x359c75d4 },
	{ 3, 5, 0, 0x0e2301b0, 0x7e54a89f },
	{ 3, 5, 1, 0x29901eda, 0x5ae20257 },
	{ 3, 5, 2, 0xffd156f0, 0xede1f7b5 },
	{ 4, 0, 0, 0xa5c0860a, 0x00000000 },
	{ 4, 1, 0, 0x2277e1d2, 0x8c9adeb6 },
	{ 4, 1, 1, 0x843156ea, 0xde4c4f37 },
	{ 4, 1, 2, 0xc9d51782, 0x02f71e55 },
	{ 4, 2, 0, 0x7f3ef6f6, 0x4bbe43ac },
	{ 4, 2, 1, 0xa7737930, 0x1ed87cf2 },
	{ 4, 2, 2, 0xc06dfd02, 0x6d816568 },
	{ 4, 3, 0, 0x4795820c, 0x00000000 },
	{ 4, 4, 0, 0xa7775e36, 0xec7fdede },
	{ 4, 4, 1, 0x5682c044, 0x5eac7b7f },
	{ 4, 4, 2, 0xf7b064a0, 0xa4da816c },
	{ 4, 5, 0, 0x907067b0, 0x5608a786 },
	{ 4, 5, 1, 0xbbd8a82c, 0xaf56fee7 },
	{ 4, 5, 2, 0x4cc6c088, 0x4ae5be50 },
	{ 5, 0, 0, 0x49ba183e, 0x00000000 },
	{ 5, 1, 0, 0x4421bc04, 0x2974faeb },
	{ 5, 1, 1, 0x1ed7d628, 0x1034b48b },
	{ 5, 1, 2, 0x3dfdef78, 0xf444414d },
	{ 5, 2, 0, 0xb7e8b4ec, 0x98edfcfe },
	{ 5, 2, 1, 0x746accca, 0x42326b7a },
	{ 5, 2, 2, 0xdbc0a54e, 0xdc5af134 },
	{ 5, 3, 0, 0x6b842a40, 0x00000000 },
	{ 5, 4, 0, 0xd77d96d6, 0xcafda2d2 },
	{ 5, 4, 1, 0x4582aeb8, 0xfb0b54fb },
	{ 5, 4, 2, 0x06ad6c32, 0xfba94abe },
	{ 5, 5, 0, 0xc6854b30, 0xfaee7448 },
	{ 5, 5, 1, 0xa704e046, 0xbc862d0c },
	{ 5, 5, 2, 0x9c54795a, 0x3d77a698 },
	{ 6, 0, 0, 0x71203fb2, 0x00000000 },
	{ 6, 1, 0, 0xbce46984, 0xa0657706 },
	{ 6, 1, 1, 0xf0732850, 0x2f2f3739 },
	{ 6, 1, 2, 0x2e3621e4, 0xe59cfbdf },
	{ 6, 2, 0, 0x87a5c08c, 0xc460584f },
	{ 6, 2, 1, 0x070fff42, 0x158b4a9d },
	{ 6, 2, 2, 0xc71615fc, 0xfe427869 },
	{ 6, 3, 0, 0x86ce51b0, 0x00000000 },
	{ 6, 4, 0, 0x17eec9ac, 0x862d5d5e },
	{ 6, 4, 1, 0x1bad4df0, 0xae1d1051 },
	{ 6, 4, 2, 0xab64ae96, 0xe5cd2380 },
	{ 6, 5, 0, 0xfabb449c, 0xbe46886b },
	{ 6, 5, 1, 0x3d098c2c, 0x720053d4 },
	{ 6, 5, 2, 0xc3ee28fa, 0x6630fe00 },
	{ 7, 0, 0, 0x523b6fba, 0x00000000 },
	{ 7, 1, 0, 0x6830bef2, 0xf541f014 },
	{ 7, 1, 1, 0x4cbad302, 0xfa7a97d7 },
	{ 7, 1, 2, 0xcbed7ea0, 0x0c7a3db7 },
	{ 7, 2, 0, 0x0c5becea, 0xcf26e132 },
	{ 7, 2, 1, 0x6bce4d6a, 0x0846aaf5 },
	{ 7, 2, 2, 0x41784e0e, 0x900aaee8 },
	{ 7, 3, 0, 0x2a30a3b8, 0x00000000 },
	{ 7, 4, 0, 0x3ab5c518, 0x808fe86d },
	{ 7, 4, 1, 0x8ca5dee6, 0x4fe88430 },
	{ 7, 4, 2, 0xae94402a, 0x38348413 },
	{ 7, 5, 0, 0xadd8ffc8, 0xe50b2a7f },
	{ 7, 5, 1, 0x4a443afa, 0x8db544b5 },
	{ 7, 5, 2, 0x57567c34, 0x5257cb1d },
	{ 8, 0, 0, 0xbfc4d58a, 0x00000000 },
	{ 8, 1, 0, 0x459b5db6, 0xfa5a182c },
	{ 8, 1, 1, 0x2edd64c4, 0xb5a9ba1c },
	{ 8, 1, 2, 0xe243f596, 0xa949402b },
	{ 8, 2, 0, 0x60069dae, 0x487b54e0 },
	{ 8, 2, 1, 0x847bc9fc, 0xb7410106 },
	{ 8, 2, 2, 0xde8c2b7a, 0x73196cb6 },
	{ 8, 3, 0, 0xc18a8782, 0x00000000 },
	{ 8, 4, 0, 0x825fbb6c, 0x8ad7a76c },
	{ 8, 4, 1, 0xfd434ee4, 0x24e154c4 },
	{ 8, 4, 2, 0x3d4f3bc0, 0x1d7116eb },
	{ 8, 5, 0, 0x1db782f4, 0x452d2cf8 },
	{ 8, 5, 1, 0x0bee6f1e, 0xf38a333e },
	{ 8, 5, 2, 0xaf4226a2, 0x67692a7e },
	{ 9, 0, 0, 0x5a5495f2, 0x00000000 },
	{ 9, 1, 0, 0x3f8a9eca, 0xa1b3ddfd },
	{ 9, 1, 1, 0xe23d23f8, 0xac54f61b },
	{ 9, 1, 2, 0xd8f7468c, 0x276af53f },
	{ 9, 2, 0, 0xad940cd6, 0x9f7f811c },
	{ 9, 2, 1, 0x199321fa, 0x569a06a8 },
	{ 9, 2, 2, 0x3a192fb4, 0x268d4fbd },
	{ 9, 3, 0, 0x4656991a, 0x00000000 },
	{ 9, 4, 0, 0x92438902, 0xc1645e7f },
	{ 9, 4, 1, 0xd2a034b6, 0x30cef1d5 },
	{ 9, 4, 2, 0x96280d8e, 0xbac97032 },
	{ 9, 5, 0, 0xdf9f9c94, 0x1711bd23 },
	{ 9, 5, 1, 0x69587cee, 0x92615090 },
	{ 9, 5, 2, 0x15d5a7c0, 0x40ad68e8 },
	{ 10, 0, 0, 0xb092defe, 0x00000000 },
	{ 10, 1, 0, 0x0d1b9dd0, 0x0ce72081 },
	{ 10, 1, 1, 0xdf88198e, 0x3b495ad0 },
	{ 10, 1, 2, 0x5fa097be, 0x8d76c27c },
	{ 10, 2, 0, 0xa78dc1c2, 0xe33463ee },
	{ 10, 2, 1, 0x00bf1288, 0x001a9d69 },
	{ 10, 2, 2, 0xa27f3824, 0xee0ae4c5 },
	{ 10, 3, 0, 0x51a91cec, 0x00000000 },
	{ 10, 4, 0, 0xaf346bd6, 0xa65dbe4d },
	{ 10, 4, 1, 0xd6107850, 0x68f32d7c },
	{ 10, 4, 2, 0x69dc0abc, 0x9b5920b5 },
	{ 10, 5, 0, 0x740f20c6, 0xd5dc1a59 },
	{ 10, 5, 1, 0x70cea848, 0x172b3042 },
	{ 10, 5, 2, 0xfedc227a, 0x0508b920 },
	{ 11, 0, 0, 0x51b2fb68, 0x00000000 },
	{ 11, 1, 0, 0xba3027de, 0xbb07cefd },
	{ 11, 1, 1, 0x26eb6634, 0x590bd414 },
	{ 11, 1, 2, 0xaf120bb6, 0x7d676bd8 },
	{ 11, 2, 0, 0x54bffea6, 0x5674bce6 },
	{ 11, 2, 1, 0xe5db406a, 0xa0ee9ab4 },
	{ 11, 2, 2, 0x17f25c3a, 0xaaca3b98 },
	{ 11, 3, 0, 0x92fd1ac6, 0x00000000 },
	{ 11, 4, 0, 0x353b55c6, 0xd4e9adb9 },
	{ 11, 4, 1, 0xa21366b6, 0x353709de },
	{ 11, 4, 2, 0x58dd5494, 0x06174c43 },
	{ 11, 5, 0, 0x18a59552, 0xe14cf4a7 },
	{ 11, 5, 1, 0x9b3055f4, 0xce078d50 },
	{ 11, 5, 2, 0xe7df3b1a, 0xda9de112 },
	{ 12, 0, 0, 0xa53c311a, 0x00000000 },
	{ 12, 1, 0, 0x1ec8598a, 0x29244279 },
	{ 12, 1, 1, 0x56ec66ae, 0x2e1e98c4 },
	{ 12, 1, 2, 0x9dce0136, 0xbe96772a },
	{ 12, 2, 0, 0xa8702996, 0xf8b7abbb },
	{ 12, 2, 1, 0x30645e1c, 0xe1402b59 },
	{ 12, 2, 2, 0x1e27d1c8, 0x021caaa9 },
	{ 12, 3, 0, 0x5b4acfd6, 0x00000000 },
	{ 12, 4, 0, 0x1c39d182, 0x86091c49 },
	{ 12, 4, 1, 0xa5882656, 0xa449d09d },
	{ 12, 4, 2, 0x4aa9eeae, 0x0fba5478 },
	{ 12, 5, 0, 0xd74ea2be, 0x85e23280 },
	{ 12, 5, 1, 0xfb168c00, 0x3314eef8 },
	{ 12, 5, 2, 0xfef49276, 0x8011bb30 },
	{ 13, 0, 0, 0xed17d794, 0x00000000 },
	{ 13, 1, 0, 0xf8fb707a, 0x09a17c46 },
	{ 13, 1, 1, 0xc07ba168, 0x89874d4e },
	{ 13, 1, 2, 0xa3e64abe, 0x6e01beb4 },
	{ 13, 2, 0, 0x708367da, 0x82a40ea3 },
	{ 13, 2, 1, 0xdff718d8, 0x2c8927b4 },
	{ 13, 2, 2, 0x6846cb88, 0x50bf3b6a },
	{ 13, 3, 0, 0xbe139ef8, 0x00000000 },
	{ 13, 4, 0, 0x87605c16, 0xa3703916 },
	{ 13, 4, 1, 0x48b08662, 0x5ccb4ce8 },
	{ 13, 4, 2, 0xe7165fe6, 0x75a940a4 },
	{ 13, 5, 0, 0x40e0b6fc, 0x1a0c6da5 },
	{ 13, 5, 1, 0x6639406a, 0xbc28d6c4 },
	{ 13, 5, 2, 0xcd78a1be, 0x40790dcc },
	{ 14, 0, 0, 0xf0b1dc82, 0x00000000 },
	{ 14, 1, 0, 0xb0f70e42, 0x552b5a41 },
	{ 14, 1, 1, 0x1921978e, 0xed9776ca },
	{ 14, 1, 2, 0xfbea731e, 0x787938cd },
	{ 14, 2, 0, 0x4ee70df2, 0x966b4ecf },
	{ 14, 2, 1, 0x76fd436c, 0x53aefbdf },
	{ 14, 2, 2, 0xafb65c0a, 0x5595f03e },
	{ 14, 3, 0, 0xc8fd4344, 0x00000000 },
	{ 14, 4, 0, 0xbf88f15c, 0x2f5b460a },
	{ 14, 4, 1, 0xc86c4f16, 0xd60d4af2 },
	{ 14, 4, 2, 0x1a853d1a, 0x61b42604 },
	{ 14, 5, 0, 0x9c303e78, 0x6cb4669c },
	{ 14, 5, 1, 0x86a8daca, 0xc7314675 },
	{ 14, 5, 2, 0xfd2b0d38, 0x6d0dc20b },
	{ 15, 0, 0, 0xecae7ee0, 0x00000000 },
	{ 15, 1, 0, 0x0d40f71e, 0x6dced8e7 },
	{ 15, 1, 1, 0x5dccbb70, 0x31047aed },
	{ 15, 1, 2, 0x33852490, 0x0d8a43ef },
	{ 15, 2, 0, 0xc35b228a, 0x187477f2 },
	{ 15, 2, 1, 0x04bccd76, 0x13d0e402 },
	{ 15, 2, 2, 0xc6ffeaf2, 0x66ef3c8e },
	{ 15, 3, 0, 0x9df1de3e, 0x00000000 },
	{ 15, 4, 0, 0x97efdf14, 0x90806b92 },
	{ 15, 4, 1, 0x0617268c, 0x1d3c7f82 },
	{ 15, 4, 2, 0xdbfe8050, 0xbfbacf0f },
	{ 15, 5, 0, 0xc05ee3fe, 0xbbb0ec50 },
	{ 15, 5, 1, 0x4a0a1b5e, 0xd2dc9a1d },
	{ 15, 5, 2, 0xbc9fa466, 0x3096a953 },
	{ 16, 0, 0, 0x6665b972, 0x00000000 },
	{ 16, 1, 0, 0x43932a7e, 0x89232359 },
	{ 16, 1, 1, 0x59b60f66, 0xc83c4ace },
	{ 16, 1, 2, 0x56fac366, 0x7a71f14e },
	{ 16, 2, 0, 0x01c0f4ec, 0x0d07b66b },
	{ 16, 2, 1, 0xd6d12ac6, 0x13ce82fc },
	{ 16, 2, 2, 0xfa05e466, 0xc288729f },
	{ 16, 3, 0, 0xa9f40ae2, 0x00000000 },
	{ 16, 4, 0, 0xf5a1725c, 0x2a252eea },
	{ 16, 4, 1, 0x8645a406, 0xb4514e94 },
	{ 16, 4, 2, 0xbde603b0, 0xc71bddd1 },
	{ 16, 5, 0, 0x7ab1d2be, 0xff2db0a9 },
	{ 16, 5, 1, 0xf930889e, 0xcff1cda8 },
	{ 16, 5, 2, 0x7ba1da88, 0x4f5a453c },
	{ 17, 0, 0, 0x2300e32a, 0x00000000 },
	{ 17, 1, 0, 0xbb97625c, 0xb9a60406 },
	{ 17, 1, 1, 0xe37774a2, 0xee0ecfec },
	{ 17, 1, 2, 0xcf11c4b8, 0x3f09cc31 },
	{ 17, 2, 0, 0x943ae080, 0xc44ee5e3 },
	{ 17, 2, 1, 0xf23a6aa4, 0x268e7851 },
	{ 17, 2, 2, 0xcaaf3fd0, 0xfec582d6 },
	{ 17, 3, 0, 0xe66108cc, 0x00000000 },
	{ 17, 4, 0, 0xa629b58e, 0x89648bce },
	{ 17, 4, 1, 0x64705d76, 0x899aecf6 },
	{ 17, 4, 2, 0x7d2ea100, 0x87f9e48d },
	{ 17, 5, 0, 0xace1d38e, 0xde35de14 },
	{ 17, 5, 1, 0x1d0f0012, 0xa5687118 },
	{ 17, 5, 2, 0x3a8e5386, 0x4085020a },
	{ 18, 0, 0, 0xd0cceddc, 0x00000000 },
	{ 18, 1, 0, 0x526b5e78, 0x87b91334 },
	{ 18, 1, 1, 0x7e7049c6, 0xe867cf96 },
	{ 18, 1, 2, 0xdd0263dc, 0x61d736e8 },
	{ 18, 2, 0, 0xd23acc6c, 0x98627d96 },
	{ 18, 2, 1, 0x2aae6f6e, 0x08454d3a },
	{ 18, 2, 2, 0x0a3dc112, 0x9c7ee05d },
	{ 18, 3, 0, 0xa59cca72, 0x00000000 },
	{ 18, 4, 0, 0x3c629736, 0xa25b69be },
	{ 18, 4, 1, 0x38f79afc, 0xfafd2b53 },
	{ 18, 4, 2, 0xb531313c, 0xbaccfc7e },
	{ 18, 5, 0, 0xcc316cb0, 0xce3c3c00 },
	{ 18, 5, 1, 0xded7d122, 0x4c8e9b1f },
	{ 18, 5, 2, 0x6fcd62be, 0x8721e829 },
	{ 19, 0, 0, 0xb0469062, 0x00000000 },
	{ 19, 1, 0, 0xe0f0b95c, 0x6dd7232b },
	{ 19, 1, 1, 0x8a10617e, 0x69e7a344 },
	{ 19, 1, 2, 0x92bf4a36, 0x355d3fcb },
	{ 19, 2, 0, 0xe15f5dea, 0x504ae7e4 },
	{ 19, 2, 1, 0x920c85d8, 0xe5513506 },
	{ 19, 2, 2, 0x9378b54c, 0xacca1abb },
	{ 19, 3, 0, 0xe81aed9a, 0x00000000 },
	{ 19, 4, 0, 0x27052d0a, 0x99a2e29a },
	{ 19, 4, 1, 0xd2aedc9a, 0x8b253526 },
	{ 19, 4, 2, 0x71a5517a, 0x4a793b89 },
	{ 19, 5, 0, 0x28b12dbe, 0xc184904b },
	{ 19, 5, 1, 0x95b7def6, 0x7a9cf0f9 },
	{ 19, 5, 2, 0x8c10354a, 0xc2539535 },
	{ 20, 0, 0, 0x2dc7aac4, 0x00000000 },
	{ 20, 1, 0, 0x62700584, 0xa4c07eff },
	{ 20, 1, 1, 0x48b56594, 0x8ee11b2f },
	{ 20, 1, 2, 0x1069b2a8, 0xa4961b24 },
	{ 20, 2, 0, 0x5f8eb642, 0xf8c1ea05 },
	{ 20, 2, 1, 0x614a00f8, 0xfe9bb8e5 },
	{ 20, 2, 2, 0x4d424ba8, 0x423df7c9 },
	{ 20, 3, 0, 0xe700203a, 0x00000000 },
	{ 20, 4, 0, 0xb2d61ad8, 0x0a2f5c96 },
	{ 20, 4, 1, 0x4c8a42d8, 0xc6d49957 },
	{ 20, 4, 2, 0xfb6fdf12, 0xff856127 },
	{ 20, 5, 0, 0x06d1a552, 0xc7bbcfe0 },
	{ 20, 5, 1, 0xa93be4aa, 0xc221e497 },
	{ 20, 5, 2, 0xe44b3b4c, 0x83d22dc4 },
};

static void seed_words(const uint8_t uuid[16], uint32_t w[4])
{
	for (int i = 0; i < 4; i++)
		w[i] = (uint32_t)uuid[4 * i] | (uint32_t)uuid[4 * i + 1] << 8 |
		       (uint32_t)uuid[4 * i + 2] << 16 | (uint32_t)uuid[4 * i + 3] << 24;
}

static void test_hash_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(hash_vecs) / sizeof(hash_vecs[0]); i++) {
		const struct hash_vec *v = &hash_vecs[i];
		const struct hash_name *nm = &hv_names[v->name];
		uint32_t seed[4], minor = 0xdeadbeef, major;

		/* a mistyped escape in the table would change the length */
		assert_int_equal(strlen(nm->s), nm->len);
		seed_words(hv_seeds[v->seed], seed);
		major = dir_name_hash(nm->s, nm->len, v->version, false, seed, &minor);
		if (major != v->major || minor != v->minor)
			fail_msg("vector %zu (name %u, %u bytes, version %u, seed %u): "
				 "got %08x/%08x, want %08x/%08x", i, v->name, nm->len, v->version,
				 v->seed, major, minor, v->major, v->minor);
		/* the unsigned variants are also reachable through the flag */
		if (v->version >= EXT4_HASH_LEGACY_UNSIGNED) {
			major = dir_name_hash(nm->s, nm->len, v->version - 3, true, seed, &minor);
			assert_int_equal(major, v->major);
			assert_int_equal(minor, v->minor);
		}
		assert_int_equal(major & 1, 0);
		assert_int_equal(dir_name_hash(nm->s, nm->len, v->version, false, seed, NULL),
				 v->major);
	}
}

/* ------------------------------------------------------------------ helpers */

static uint32_t rec_size(uint32_t name_len)
{
	return (8 + name_len + 3) & ~3u;
}

/* The test's own version of the per-inode checksum seed. */
static uint32_t inode_seed(const struct dir_params *p)
{
	uint8_t le[4];
	uint32_t c;

	le[0] = (uint8_t)p->ino;
	le[1] = (uint8_t)(p->ino >> 8);
	le[2] = (uint8_t)(p->ino >> 16);
	le[3] = (uint8_t)(p->ino >> 24);
	c = crc32c(p->csum_seed, le, 4);
	le[0] = (uint8_t)p->generation;
	le[1] = (uint8_t)(p->generation >> 8);
	le[2] = (uint8_t)(p->generation >> 16);
	le[3] = (uint8_t)(p->generation >> 24);
	return crc32c(c, le, 4);
}

static struct dir_params test_params(void)
{
	static const uint8_t uuid[16] = { 0x3f, 0x2a, 0x6c, 0x1e, 0x8d, 0x4b, 0x4e, 0x7a,
					  0x9c, 0x15, 0x0b, 0x6d, 0x2e, 0x8f, 0x4a, 0x71 };
	static const uint8_t hseed[16] = { 0xc0, 0xff, 0xee, 0x00, 0x12, 0x34, 0x56, 0x78,
					   0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78 };
	struct dir_params p = {
		.ino = 5001,
		.parent_ino = 2,
		.generation = 0x9abcdef1,
		.hash_version = EXT4_HASH_HALF_MD4,
		.unsigned_hash = false,
	};

	p.csum_seed = crc32c(~0u, uuid, 16);
	seed_words(hseed, p.hash_seed);
	return p;
}

/* A set of entries whose names live in one buffer (256 bytes per entry). */
struct ents {
	struct dir_entry_in *e;
	char *buf;
	size_t n;
};

enum name_kind {
	NAMES_SHORT,          /* "f0000123" plus 0..20 random letters */
	NAMES_BYTES,          /* 1..255 random bytes (anything but NUL and '/') */
	NAMES_LONG,           /* 255 random bytes */
};

static int name_cmp(const void *a, const void *b)
{
	const struct dir_entry_in *x = a, *y = b;
	size_t l = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, l);

	return c ? c : (int)x->name_len - (int)y->name_len;
}

static uint8_t rand_name_byte(uint64_t *s)
{
	uint8_t c;

	do
		c = (uint8_t)prng_next(s);
	while (c == 0 || c == '/');
	return c;
}

static void ents_make(struct ents *E, size_t n, enum name_kind kind, uint64_t seed)
{
	E->n = n;
	E->e = calloc(n ? n : 1, sizeof(*E->e));
	E->buf = malloc(n ? n * 256 : 1);
	assert_non_null(E->e);
	assert_non_null(E->buf);
	for (size_t i = 0; i < n; i++) {
		char *nm = E->buf + i * 256;
		size_t len;

		if (kind == NAMES_SHORT) {
			/* padded with 'z' so tests may lengthen or shorten the names */
			memset(nm, 'z', 256);
			len = (size_t)snprintf(nm, 256, "f%07zu", i);
			nm[len] = 'z';
			for (uint64_t k = prng_next(&seed) % 21; k; k--)
				nm[len++] = (char)('a' + prng_next(&seed) % 26);
		} else {
			len = kind == NAMES_LONG ? 255 : 1 + prng_next(&seed) % 255;
			for (size_t k = 0; k < len; k++)
				nm[k] = (char)rand_name_byte(&seed);
			/* unique: the index in the first bytes (no NUL, no '/') */
			if (len >= 3) {
				nm[0] = (char)(0x80 | (i & 0x7f));
				nm[1] = (char)(0x80 | ((i >> 7) & 0x7f));
				nm[2] = (char)(0x80 | ((i >> 14) & 0x7f));
			} else {
				len = 3;
				nm[0] = (char)(0x80 | (i & 0x7f));
				nm[1] = (char)(0x80 | ((i >> 7) & 0x7f));
				nm[2] = (char)(0x80 | ((i >> 14) & 0x7f));
			}
		}
		E->e[i].name = nm;
		E->e[i].name_len = (uint8_t)len;
		E->e[i].file_type = (uint8_t)(1 + i % 7);
	}
	/* the caller (mkfs) passes entries sorted by name */
	qsort(E->e, n, sizeof(*E->e), name_cmp);
	for (size_t i = 0; i < n; i++)
		E->e[i].ino = INO_BASE + (uint32_t)i;
}

static void ents_free(struct ents *E)
{
	free(E->e);
	free(E->buf);
}

static uint8_t *plan_render(const struct ents *E, const struct dir_params *p,
			    struct dir_plan **out)
{
	struct dir_plan *d = NULL;
	uint8_t *blocks;

	assert_int_equal(dir_plan_new(E->e, E->n, p, &d), 0);
	assert_non_null(d);
	assert_true(dir_nblocks(d) >= 1);
	blocks = malloc((size_t)dir_nblocks(d) * BLK);
	assert_non_null(blocks);
	memset(blocks, 0xa5, (size_t)dir_nblocks(d) * BLK);  /* render must overwrite all */
	assert_int_equal(dir_render(d, blocks), 0);
	*out = d;
	return blocks;
}

/* ------------------------------------------------------------------ block checks */

/* One dirent at p: sane header, and (optionally) the expected contents. */
static void check_dirent(const uint8_t *p, uint32_t ino, const char *name, uint8_t name_len,
			 uint8_t ft)
{
	assert_int_equal(le32_get(p), ino);
	assert_int_equal(p[6], name_len);
	assert_int_equal(p[7], ft);
	assert_memory_equal(p + 8, name, name_len);
}

/* The 12-byte dirent tail at 4084 and the block checksum it holds. */
static void check_leaf_tail(const uint8_t *b, uint32_t iseed)
{
	const uint8_t *t = b + BLK - 12;

	assert_int_equal(le32_get(t), 0);
	assert_int_equal(le16_get(t + 4), 12);
	assert_int_equal(t[6], 0);
	assert_int_equal(t[7], 0xde);
	assert_int_equal(le32_get(t + 8), crc32c(iseed, b, BLK - 12));
}

/*
 * Walks the dirents of a leaf (or linear block after skip bytes): rec_lens aligned, big
 * enough, never crossing the tail, summing exactly to 4084. Calls fn on each.
 */
typedef void (*dirent_fn)(const uint8_t *de, void *arg);

static size_t walk_dirents(const uint8_t *b, uint32_t skip, dirent_fn fn, void *arg)
{
	uint32_t off = skip;
	size_t count = 0;

	while (off < BLK - 12) {
		const uint8_t *de = b + off;
		uint32_t rl = le16_get(de + 4);

		assert_int_equal(rl % 4, 0);
		assert_true(rl >= 12);
		assert_true(rl >= rec_size(de[6]));
		assert_true(off + rl <= BLK - 12);
		/* bytes after the name up to the next record are zero */
		for (uint32_t k = 8 + de[6]; k < rec_size(de[6]); k++)
			assert_int_equal(de[k], 0);
		fn(de, arg);
		count++;
		off += rl;
	}
	assert_int_equal(off, BLK - 12);
	return count;
}

struct seen_ctx {
	const struct ents *E;
	uint8_t *seen;               /* per entry */
	const struct dir_params *p;
	/* htree only: the hash range of the leaf being walked */
	bool check_range;
	uint32_t lo, hi;             /* lo <= hash <= hi (both with the low bit clear) */
};

static void seen_dirent(const uint8_t *de, void *arg)
{
	struct seen_ctx *c = arg;
	uint32_t ino = le32_get(de), idx;
	const struct dir_entry_in *e;

	assert_true(ino >= INO_BASE && ino < INO_BASE + c->E->n);
	idx = ino - INO_BASE;
	e = &c->E->e[idx];
	check_dirent(de, e->ino, e->name, e->name_len, e->file_type);
	c->seen[idx]++;
	if (c->check_range) {
		uint32_t h = dir_name_hash(e->name, e->name_len, c->p->hash_version,
					   c->p->unsigned_hash, c->p->hash_seed, NULL);

		assert_true(h >= c->lo);
		assert_true(h <= c->hi);
	}
}

static void check_linear(const uint8_t *b, const struct ents *E, const struct dir_params *p)
{
	uint8_t *seen = calloc(E->n ? E->n : 1, 1);
	struct seen_ctx c = { .E = E, .seen = seen, .p = p };
	uint32_t off;

	assert_non_null(seen);
	check_dirent(b, p->ino, ".", 1, EXT4_FT_DIR);
	assert_int_equal(le16_get(b + 4), 12);
	check_dirent(b + 12, p->parent_ino, "..", 2, EXT4_FT_DIR);
	assert_int_equal(le16_get(b + 16), E->n ? 12 : BLK - 12 - 12);
	if (E->n)
		assert_int_equal(walk_dirents(b, 24, seen_dirent, &c), E->n);
	for (size_t i = 0; i < E->n; i++)
		assert_int_equal(seen[i], 1);
	/* order kept: entry i is the i-th record */
	off = 24;
	for (size_t i = 0; i < E->n; i++) {
		assert_int_equal(le32_get(b + off), E->e[i].ino);
		if (i + 1 < E->n)
			assert_int_equal(le16_get(b + off + 4), rec_size(E->e[i].name_len));
		off += le16_get(b + off + 4);
	}
	check_leaf_tail(b, inode_seed(p));
	free(seen);
}

/* dx_tail at 4088: reserved zero, checksum over count_off + count * 8 bytes + the tail. */
static void check_dx_tail(const uint8_t *b, uint32_t count_off, uint32_t iseed)
{
	const uint8_t zero[8] = { 0 };
	uint32_t limit = le16_get(b + count_off), count = le16_get(b + count_off + 2), c;

	assert_int_equal(count_off + limit * 8, BLK - 8);
	assert_true(count >= 1 && count <= limit);
	/* unused entries are zero */
	for (uint32_t k = count_off + count * 8; k < BLK - 8; k++)
		assert_int_equal(b[k], 0);
	assert_int_equal(le32_get(b + BLK - 8), 0);
	c = crc32c(iseed, b, count_off + count * 8);
	c = crc32c(c, zero, 8);
	assert_int_equal(le32_get(b + BLK - 4), c);
}

struct leaf_ref {
	uint32_t hash;               /* as stored (collision bit included); 0 for the first */
	uint32_t block;
};

/* Index entry i of the count/limit array at ents: hash (0 for entry 0) and block. */
static struct leaf_ref dx_at(const uint8_t *ents, uint32_t i)
{
	struct leaf_ref r = { i ? le32_get(ents + 8 * i) : 0, le32_get(ents + 8 * i + 4) };

	return r;
}

/* Like the kernel's dx_probe(): the last entry whose hash is <= h. */
static uint32_t dx_search(const uint8_t *ents, uint32_t h)
{
	uint32_t lo = 1, hi = le16_get(ents + 2);

	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;

		if (le32_get(ents + 8 * m) > h)
			hi = m;
		else
			lo = m + 1;
	}
	return lo - 1;
}

struct htree {
	const uint8_t *blocks;
	uint32_t nblocks;
	uint32_t levels;
	struct leaf_ref *leaves;     /* in index order */
	uint32_t nleaves;
	uint32_t *pos_of_block;      /* leaf block -> position in leaves */
};

static void parse_htree(struct htree *t, const uint8_t *blocks, uint32_t nblocks,
			const struct dir_params *p)
{
	const uint8_t *root = blocks;
	const uint8_t *rents = root + 32;
	uint32_t iseed = inode_seed(p), rcount;
	uint8_t *refd = calloc(nblocks, 1);

	assert_non_null(refd);
	memset(t, 0, sizeof(*t));
	t->blocks = blocks;
	t->nblocks = nblocks;
	/* fake "." and "..", dx_root_info */
	check_dirent(root, p->ino, ".", 1, EXT4_FT_DIR);
	assert_int_equal(le16_get(root + 4), 12);
	check_dirent(root + 12, p->parent_ino, "..", 2, EXT4_FT_DIR);
	assert_int_equal(le16_get(root + 16), BLK - 12);
	assert_int_equal(le32_get(root + 24), 0);
	assert_int_equal(root[28], p->hash_version);
	assert_int_equal(root[29], 8);
	t->levels = root[30];
	assert_true(t->levels <= 1);     /* no largedir: indirect_levels 0 or 1 */
	assert_int_equal(root[31], 0);
	assert_int_equal(le16_get(rents), (BLK - 32 - 8) / 8);     /* 507 */
	check_dx_tail(root, 32, iseed);
	refd[0] = 1;

	t->leaves = calloc(nblocks, sizeof(*t->leaves));
	t->pos_of_block = calloc(nblocks, sizeof(*t->pos_of_block));
	assert_non_null(t->leaves);
	assert_non_null(t->pos_of_block);
	rcount = le16_get(rents + 2);
	for (uint32_t i = 0; i < rcount; i++) {
		struct leaf_ref r = dx_at(rents, i);

		assert_true(r.block > 0 && r.block < nblocks);
		assert_int_equal(refd[r.block], 0);
		refd[r.block] = 1;
		if (t->levels == 0) {
			t->leaves[t->nleaves++] = r;
			continue;
		}
		/* an interior node: empty dirent over the whole block, then count/limit */
		const uint8_t *nb = blocks + (size_t)r.block * BLK;
		const uint8_t *nents = nb + 8;

		assert_int_equal(le32_get(nb), 0);
		assert_int_equal(le16_get(nb + 4), BLK);
		assert_int_equal(nb[6], 0);
		assert_int_equal(nb[7], 0);
		assert_int_equal(le16_get(nents), (BLK - 8 - 8) / 8);      /* 510 */
		check_dx_tail(nb, 8, iseed);
		for (uint32_t j = 0; j < le16_get(nents + 2); j++) {
			struct leaf_ref l = dx_at(nents, j);

			/* a node's first range starts where the node's own does */
			if (j == 0)
				l.hash = r.hash;
			assert_true(l.block > 0 && l.block < nblocks);
			assert_int_equal(refd[l.block], 0);
			refd[l.block] = 1;
			t->leaves[t->nleaves++] = l;
		}
	}
	/* every block is referenced exactly once; hash ranges ascend */
	for (uint32_t b = 0; b < nblocks; b++)
		assert_int_equal(refd[b], 1);
	for (uint32_t i = 0; i < t->nleaves; i++) {
		t->pos_of_block[t->leaves[i].block] = i;
		if (i)
			assert_true((t->leaves[i].hash & ~1u) >= (t->leaves[i - 1].hash & ~1u));
	}
	assert_int_equal(t->leaves[0].hash, 0);
	free(refd);
}

/* Finds name in leaf block b (NULL if absent). */
static const uint8_t *leaf_find(const uint8_t *b, const char *name, uint8_t len)
{
	uint32_t off = 0;

	while (off < BLK - 12) {
		const uint8_t *de = b + off;

		if (le32_get(de) && de[6] == len && !memcmp(de + 8, name, len))
			return de;
		off += le16_get(de + 4);
	}
	return NULL;
}

/*
 * Looks name up the way the kernel does: probe the index for its hash, search that leaf,
 * then keep going into the following leaves while their index hash is ours with the
 * collision bit set. Returns the dirent, or NULL.
 */
static const uint8_t *htree_lookup(const struct htree *t, const struct dir_params *p,
				   const char *name, uint8_t len, uint32_t *leaves_read)
{
	uint32_t h = dir_name_hash(name, len, p->hash_version, p->unsigned_hash, p->hash_seed,
				   NULL);
	const uint8_t *ents = t->blocks + 32;
	struct leaf_ref r = dx_at(ents, dx_search(ents, h));
	uint32_t pos;

	if (t->levels) {
		ents = t->blocks + (size_t)r.block * BLK + 8;
		r = dx_at(ents, dx_search(ents, h));
	}
	*leaves_read = 0;
	for (pos = t->pos_of_block[r.block]; pos < t->nleaves; pos++) {
		const uint8_t *de;

		if (pos != t->pos_of_block[r.block] && t->leaves[pos].hash != (h | 1))
			break;
		(*leaves_read)++;
		de = leaf_find(t->blocks + (size_t)t->leaves[pos].block * BLK, name, len);
		if (de)
			return de;
	}
	return NULL;
}

/* Everything a reader (and e2fsck pass 2) checks on an htree, plus every lookup. */
static void check_htree(const uint8_t *blocks, uint32_t nblocks, const struct ents *E,
			const struct dir_params *p, uint32_t *levels)
{
	struct htree t;
	uint8_t *seen = calloc(E->n, 1);
	struct seen_ctx c = { .E = E, .seen = seen, .p = p, .check_range = true };
	uint32_t iseed = inode_seed(p);
	size_t total = 0;

	assert_non_null(seen);
	parse_htree(&t, blocks, nblocks, p);
	assert_int_equal(1 + (t.levels ? le16_get(blocks + 34) : 0) + t.nleaves, nblocks);
	for (uint32_t i = 0; i < t.nleaves; i++) {
		const uint8_t *b = blocks + (size_t)t.leaves[i].block * BLK;

		c.lo = t.leaves[i].hash & ~1u;
		c.hi = i + 1 < t.nleaves ? t.leaves[i + 1].hash & ~1u : 0xfffffffeu;
		total += walk_dirents(b, 0, seen_dirent, &c);
		check_leaf_tail(b, iseed);
	}
	assert_int_equal(total, E->n);
	for (size_t i = 0; i < E->n; i++)
		assert_int_equal(seen[i], 1);
	for (size_t i = 0; i < E->n; i++) {
		const struct dir_entry_in *e = &E->e[i];
		uint32_t nread;
		const uint8_t *de = htree_lookup(&t, p, e->name, e->name_len, &nread);

		if (!de)
			fail_msg("entry %zu not found through the index", i);
		assert_int_equal(le32_get(de), e->ino);
	}
	if (levels)
		*levels = t.levels;
	free(t.leaves);
	free(t.pos_of_block);
	free(seen);
}

/* ------------------------------------------------------------------ linear */

static void test_empty_dir(void **state)
{
	struct dir_params p = test_params();
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;

	(void)state;
	ents_make(&E, 0, NAMES_SHORT, 1);
	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 1);
	assert_false(dir_is_htree(d));
	check_linear(b, &E, &p);
	/* also with a NULL array */
	dir_plan_free(d);
	assert_int_equal(dir_plan_new(NULL, 0, &p, &d), 0);
	assert_int_equal(dir_nblocks(d), 1);
	dir_plan_free(d);
	free(b);
	ents_free(&E);
}

static void test_linear_small(void **state)
{
	struct dir_params p = test_params();
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;

	(void)state;
	for (size_t n = 1; n <= 40; n += 13) {
		ents_make(&E, n, NAMES_BYTES, n);
		/* keep them small enough for one block */
		for (size_t i = 0; i < n; i++)
			if (E.e[i].name_len > 80)
				E.e[i].name_len = 80;
		b = plan_render(&E, &p, &d);
		assert_int_equal(dir_nblocks(d), 1);
		assert_false(dir_is_htree(d));
		check_linear(b, &E, &p);
		dir_plan_free(d);
		free(b);
		ents_free(&E);
	}
}

/*
 * Exactly full: "." + ".." (24) + 253 records of 16 + one of 12 = 4084. One more byte of
 * name in the short one (12 -> 16) no longer fits and the directory becomes an htree,
 * whose entries (4064 bytes) fit one leaf of 4084; 5 more bytes make that two leaves.
 */
static void test_linear_exactly_full(void **state)
{
	struct dir_params p = test_params();
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;

	(void)state;
	ents_make(&E, 254, NAMES_SHORT, 7);
	for (size_t i = 0; i < E.n; i++)
		E.e[i].name_len = 8;            /* "f0000123" */
	E.e[E.n - 1].name_len = 4;
	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 1);
	assert_false(dir_is_htree(d));
	check_linear(b, &E, &p);
	/* the last record is exactly its own size: nothing to stretch */
	assert_int_equal(le16_get(b + BLK - 12 - 12 + 4), 12);
	dir_plan_free(d);
	free(b);

	E.e[E.n - 1].name_len = 5;
	b = plan_render(&E, &p, &d);
	assert_true(dir_is_htree(d));
	assert_int_equal(dir_nblocks(d), 2);    /* root + one leaf */
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	assert_int_equal(le16_get(b + 32 + 2), 1);
	dir_plan_free(d);
	free(b);

	E.e[E.n - 1].name_len = 8;
	E.e[E.n - 2].name_len = 8 + 5;          /* 4064 + 4 = 4068 ... */
	E.e[E.n - 3].name_len = 8 + 5;          /* ... + 4 = 4072: fits (root + 1 leaf) */
	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 2);
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	dir_plan_free(d);
	free(b);
	for (size_t i = 0; i < 4; i++)
		E.e[i].name_len = 8 + 5;        /* 4072 + 16 = 4088 > 4084: two leaves */
	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 3);
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	dir_plan_free(d);
	free(b);
	ents_free(&E);
}

/* 255-byte names with any bytes, linear (15 fit) and just over. */
static void test_linear_long_names(void **state)
{
	struct dir_params p = test_params();
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;

	(void)state;
	ents_make(&E, 15, NAMES_LONG, 3);       /* 24 + 15 * 264 = 3984 */
	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 1);
	check_linear(b, &E, &p);
	dir_plan_free(d);
	free(b);
	ents_free(&E);

	ents_make(&E, 16, NAMES_LONG, 4);
	b = plan_render(&E, &p, &d);
	assert_true(dir_is_htree(d));
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	dir_plan_free(d);
	free(b);
	ents_free(&E);
}

/* ------------------------------------------------------------------ htree */

static void htree_case(size_t n, enum name_kind kind, uint64_t seed, struct dir_params p,
		       uint32_t want_levels)
{
	struct ents E;
	struct dir_plan *d, *d2;
	uint8_t *b, *b2;
	uint32_t levels;

	ents_make(&E, n, kind, seed);
	b = plan_render(&E, &p, &d);
	assert_true(dir_is_htree(d));
	check_htree(b, dir_nblocks(d), &E, &p, &levels);
	assert_int_equal(levels, want_levels);
	/* deterministic */
	b2 = plan_render(&E, &p, &d2);
	assert_int_equal(dir_nblocks(d2), dir_nblocks(d));
	assert_memory_equal(b, b2, (size_t)dir_nblocks(d) * BLK);
	dir_plan_free(d2);
	free(b2);
	dir_plan_free(d);
	free(b);
	ents_free(&E);
}

static void test_htree_one_level(void **state)
{
	struct dir_params p = test_params();

	(void)state;
	htree_case(300, NAMES_SHORT, 11, p, 0);
	htree_case(5000, NAMES_BYTES, 12, p, 0);
}

/* Every hash algorithm, signed and unsigned, with and without a seed. */
static void test_htree_hash_variants(void **state)
{
	(void)state;
	for (uint8_t v = EXT4_HASH_LEGACY; v <= EXT4_HASH_TEA; v++) {
		for (int u = 0; u < 2; u++) {
			struct dir_params p = test_params();

			p.hash_version = v;
			p.unsigned_hash = u;
			if (v == EXT4_HASH_TEA)
				memset(p.hash_seed, 0, sizeof(p.hash_seed));
			htree_case(2000, NAMES_BYTES, 20 + v * 2 + u, p, 0);
		}
	}
}

/* More than 507 leaves: a root over interior index nodes (indirect_levels 1). */
static void test_htree_two_levels(void **state)
{
	struct dir_params p = test_params();

	(void)state;
	htree_case(10000, NAMES_LONG, 31, p, 1);        /* 667 leaves */
	htree_case(507 * 15, NAMES_LONG, 32, p, 0);     /* exactly a full root */
	htree_case(507 * 15 + 1, NAMES_LONG, 33, p, 1);
}

/*
 * Two names with the same major hash split between two leaves: the second leaf's index
 * entry carries the collision bit, and a lookup of the second name goes through the
 * first leaf into the next. The pair is found by brute force (deterministic PRNG), and
 * filler names hashing below it fill the first leaf exactly up to and including the
 * first of the pair.
 */
struct hn {
	uint32_t major, minor;
	uint32_t i;
};

static int hn_cmp(const void *a, const void *b)
{
	const struct hn *x = a, *y = b;

	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void test_htree_collision(void **state)
{
	enum { CAND = 300000, LEN = 8 };
	struct dir_params p = test_params();
	char *cand = malloc((size_t)CAND * LEN);
	struct hn *h = malloc(CAND * sizeof(*h));
	uint64_t s = 99;
	size_t pair = 0;
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;
	uint32_t H, a, c;

	(void)state;
	assert_non_null(cand);
	assert_non_null(h);
	for (uint32_t i = 0; i < CAND; i++) {
		for (int k = 0; k < LEN; k++)
			cand[(size_t)i * LEN + k] = (char)('a' + prng_next(&s) % 26);
		h[i].major = dir_name_hash(cand + (size_t)i * LEN, LEN, p.hash_version,
					   p.unsigned_hash, p.hash_seed, &h[i].minor);
		h[i].i = i;
	}
	qsort(h, CAND, sizeof(*h), hn_cmp);
	/* the colliding pair with the largest hash (plenty of room below it for fillers) */
	for (size_t i = 1; i < CAND; i++)
		if (h[i].major == h[i - 1].major && h[i].minor != h[i - 1].minor &&
		    memcmp(cand + (size_t)h[i].i * LEN, cand + (size_t)h[i - 1].i * LEN, LEN))
			pair = i;
	assert_true(pair > 0);
	H = h[pair].major;
	/* a sorts first in the directory: the smaller minor hash */
	a = h[pair - 1].minor < h[pair].minor ? h[pair - 1].i : h[pair].i;
	c = a == h[pair].i ? h[pair - 1].i : h[pair].i;
	print_message("collision: major %08x for \"%.8s\" and \"%.8s\"\n", H,
		      cand + (size_t)a * LEN, cand + (size_t)c * LEN);

	/*
	 * 254 fillers of 16 bytes below H, then a: 4064 + 16 = 4080 of the 4084 bytes of the
	 * first leaf; c (16 more) has to start the second.
	 */
	E.n = 0;
	E.e = calloc(256, sizeof(*E.e));
	E.buf = NULL;
	assert_non_null(E.e);
	for (size_t i = 0; i < CAND && E.n < 254 && h[i].major < H; i++) {
		E.e[E.n].name = cand + (size_t)h[i].i * LEN;
		E.e[E.n].name_len = LEN;
		E.e[E.n].file_type = EXT4_FT_REG_FILE;
		E.n++;
	}
	assert_int_equal(E.n, 254);
	E.e[E.n].name = cand + (size_t)a * LEN;
	E.e[E.n].name_len = LEN;
	E.e[E.n++].file_type = EXT4_FT_REG_FILE;
	E.e[E.n].name = cand + (size_t)c * LEN;
	E.e[E.n].name_len = LEN;
	E.e[E.n++].file_type = EXT4_FT_REG_FILE;
	for (size_t i = 0; i < E.n; i++)
		E.e[i].ino = INO_BASE + (uint32_t)i;

	b = plan_render(&E, &p, &d);
	assert_int_equal(dir_nblocks(d), 3);
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	/* root entry 1 -> second leaf, hash H with the collision bit */
	assert_int_equal(le16_get(b + 32 + 2), 2);
	assert_int_equal(le32_get(b + 32 + 8), H | 1);
	/* the first leaf ends with a, the second leaf is c alone */
	{
		uint32_t l0 = le32_get(b + 32 + 4), l1 = le32_get(b + 32 + 12), nread;
		struct htree t;
		const uint8_t *de;

		assert_non_null(leaf_find(b + (size_t)l0 * BLK, cand + (size_t)a * LEN, LEN));
		assert_non_null(leaf_find(b + (size_t)l1 * BLK, cand + (size_t)c * LEN, LEN));
		assert_int_equal(le32_get(b + (size_t)l1 * BLK), E.e[E.n - 1].ino);
		assert_int_equal(le16_get(b + (size_t)l1 * BLK + 4), BLK - 12);
		parse_htree(&t, b, dir_nblocks(d), &p);
		de = htree_lookup(&t, &p, cand + (size_t)c * LEN, LEN, &nread);
		assert_non_null(de);
		assert_int_equal(nread, 2);     /* found by following the collision bit */
		free(t.leaves);
		free(t.pos_of_block);
	}
	dir_plan_free(d);
	free(b);
	free(E.e);
	free(h);
	free(cand);
}

/* ------------------------------------------------------------------ errors, scale */

static void test_bad_input(void **state)
{
	struct dir_params p = test_params();
	struct dir_entry_in e = { .name = "x", .name_len = 1, .file_type = 1, .ino = 12 };
	struct dir_plan *d = NULL;

	(void)state;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), 0);
	dir_plan_free(d);
	dir_plan_free(NULL);
	assert_int_equal(dir_plan_new(&e, 1, NULL, &d), -EINVAL);
	assert_int_equal(dir_plan_new(NULL, 1, &p, &d), -EINVAL);
	e.name = ".";
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.name = "..";
	e.name_len = 2;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.name = "a/b";
	e.name_len = 3;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.name = "a\0b";
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.name = "abc";
	e.name_len = 0;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.name_len = 3;
	e.ino = 0;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	e.ino = 12;
	p.hash_version = EXT4_HASH_HALF_MD4_UNSIGNED;  /* s_flags says unsigned, not this */
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), -EINVAL);
	p.hash_version = EXT4_HASH_HALF_MD4;
	/* "..." and ".a" are ordinary names */
	e.name = "...";
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), 0);
	dir_plan_free(d);
	e.name = ".ab";
	e.name_len = 2;
	assert_int_equal(dir_plan_new(&e, 1, &p, &d), 0);
	dir_plan_free(d);
}

static void test_large_dir_timing(void **state)
{
	enum { N = 100000 };
	struct dir_params p = test_params();
	struct ents E;
	struct dir_plan *d;
	uint8_t *b;
	double t0, t1, t2;

	(void)state;
	ents_make(&E, N, NAMES_SHORT, 77);
	t0 = now_monotonic();
	assert_int_equal(dir_plan_new(E.e, E.n, &p, &d), 0);
	t1 = now_monotonic();
	b = malloc((size_t)dir_nblocks(d) * BLK);
	assert_non_null(b);
	assert_int_equal(dir_render(d, b), 0);
	t2 = now_monotonic();
	print_message("%d-entry directory: %u blocks, plan %.1f ms, render %.1f ms "
		      "(%.0f ns/entry)\n", N, dir_nblocks(d), (t1 - t0) * 1e3, (t2 - t1) * 1e3,
		      (t2 - t0) * 1e9 / N);
	check_htree(b, dir_nblocks(d), &E, &p, NULL);
	dir_plan_free(d);
	free(b);
	ents_free(&E);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_vectors),
		cmocka_unit_test(test_empty_dir),
		cmocka_unit_test(test_linear_small),
		cmocka_unit_test(test_linear_exactly_full),
		cmocka_unit_test(test_linear_long_names),
		cmocka_unit_test(test_htree_one_level),
		cmocka_unit_test(test_htree_hash_variants),
		cmocka_unit_test(test_htree_two_levels),
		cmocka_unit_test(test_htree_collision),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_large_dir_timing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
