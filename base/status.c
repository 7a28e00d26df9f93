/* status.c — names for gt_status_t codes. */
#include "gt_base.h"

const char *gt_status_str(gt_status_t status)
{
    switch (status) {
    case GT_OK: return "ok";
    case GT_ERR_INVALID: return "invalid argument";
    case GT_ERR_NOMEM: return "out of memory";
    case GT_ERR_IO: return "input/output error";
    case GT_ERR_CONFIG: return "invalid configuration";
    case GT_ERR_NOT_FOUND: return "not found";
    case GT_ERR_EXISTS: return "already exists";
    case GT_ERR_TIMEOUT: return "timed out";
    case GT_ERR_AGAIN: return "try again";
    case GT_ERR_CORRUPT: return "corrupt data";
    case GT_ERR_AUTH: return "authentication failed";
    case GT_ERR_PEER_LOST: return "peer lost";
    case GT_ERR_UNSUPPORTED: return "unsupported";
    case GT_ERR_OVERFLOW: return "size out of range";
    case GT_ERR_CLOSED: return "closed";
    case GT_ERR_INTERNAL: return "internal error";
    case GT_ERR_RETIRED: return "retired from the run";
    }
    return "unknown status";
}
