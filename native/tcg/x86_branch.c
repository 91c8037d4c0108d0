/* Branch classification of x86-64 instructions, and TLB-dropping ones: see x86_branch.h. */
#include "x86_branch.h"

static int is_prefix(uint8_t b)
{
    switch (b) {
    case 0xf0: case 0xf2: case 0xf3:                        /* lock, repne, rep */
    case 0x2e: case 0x36: case 0x3e: case 0x26: case 0x64: case 0x65:  /* segments, branch hints */
    case 0x66: case 0x67:                                   /* operand and address size */
        return 1;
    default:
        return (b & 0xf0) == 0x40;                          /* REX */
    }
}

static int is_string_op(uint8_t op)
{
    return (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) || (op >= 0x6c && op <= 0x6f);
}

static int64_t rel8(const uint8_t *p)
{
    return (int8_t)p[0];
}

static int64_t rel32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

enum branch_kind x86_classify(const uint8_t *bytes, size_t len, uint64_t vaddr, struct branch_info *info)
{
    size_t i = 0;
    int rep = 0;
    info->kind = BR_NONE;
    info->target = 0;
    info->fallthrough = vaddr + len;
    for (; i < len && is_prefix(bytes[i]); i++)
        rep |= bytes[i] == 0xf2 || bytes[i] == 0xf3;
    if (i >= len)
        return BR_NONE;
    uint8_t op = bytes[i];
    if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3)) {
        if (i + 2 > len)
            return BR_NONE;
        info->kind = BR_COND;
        info->target = info->fallthrough + (uint64_t)rel8(bytes + i + 1);
    } else if (op == 0x0f && i + 1 < len && bytes[i + 1] >= 0x80 && bytes[i + 1] <= 0x8f) {
        if (i + 6 > len)
            return BR_NONE;
        info->kind = BR_COND;
        info->target = info->fallthrough + (uint64_t)rel32(bytes + i + 2);
    } else if (op == 0xff && i + 1 < len) {
        unsigned reg = (bytes[i + 1] >> 3) & 7;
        if (reg == 2 || reg == 4)
            info->kind = BR_IND;
    } else if (rep && is_string_op(op)) {
        info->kind = BR_REP;
        info->target = vaddr;
    }
    return info->kind;
}

int x86_flushes_tlb(const uint8_t *bytes, size_t len)
{
    size_t i = 0;
    int opsize = 0;
    for (; i < len && is_prefix(bytes[i]); i++)
        opsize |= bytes[i] == 0x66;
    if (i + 2 >= len || bytes[i] != 0x0f)                   /* 0F, the opcode and one byte more */
        return 0;
    uint8_t op = bytes[i + 1], next = bytes[i + 2];
    unsigned mod = next >> 6, reg = (next >> 3) & 7;
    if (op == 0x22)                                         /* mov to CRn: CR3 or CR4 */
        return reg == 3 || reg == 4;
    if (op == 0x01)                                         /* INVLPG m (/7 with mod 3: SWAPGS, RDTSCP) */
        return reg == 7 && mod != 3;
    return opsize && op == 0x38 && next == 0x82;            /* INVPCID */
}
