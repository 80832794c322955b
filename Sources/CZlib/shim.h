// The system zlib (zlib1g-dev), for compressing stored payloads (ReconcilerDomain's Deflate).
#include <zlib.h>
