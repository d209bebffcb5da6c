// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Device memory (HBM) of a simulated device: a drm_mm range allocator over
 * an aperture whose pages are allocated on first write and kept in an xarray,
 * so a 96 GiB device costs nothing until used. Unpopulated pages read as
 * zero. Pages of a range are freed when a BO is created over it and when the
 * BO is freed, so memory never passes from one tenant to the next unzeroed.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

int neuron_hbm_init(struct neuron_device *ndev)
{
	struct neuron_hbm *hbm = &ndev->hbm;
	int ret;

	hbm->size = ndev->desc.hbm_size;
	mutex_init(&hbm->lock);
	drm_mm_init(&hbm->mm, 0, hbm->size);
	xa_init(&hbm->pages);
	drm_vma_node_reset(&hbm->vma);
	ret = drm_vma_offset_add(ndev->drm.vma_offset_manager, &hbm->vma,
				 hbm->size >> PAGE_SHIFT);
	if (ret) {
		drm_mm_takedown(&hbm->mm);
		mutex_destroy(&hbm->lock);
	}
	return ret;
}

static void neuron_hbm_drop_pages(struct neuron_hbm *hbm, unsigned long first,
				  unsigned long last)
{
	struct page *page;
	unsigned long idx;

	xa_for_each_range(&hbm->pages, idx, page, first, last) {
		xa_erase(&hbm->pages, idx);
		__free_page(page);
		atomic64_dec(&hbm->resident);
	}
}

void neuron_hbm_fini(struct neuron_device *ndev)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	drm_vma_offset_remove(ndev->drm.vma_offset_manager, &hbm->vma);
	neuron_hbm_drop_pages(hbm, 0, ULONG_MAX);
	xa_destroy(&hbm->pages);
	if (!drm_mm_clean(&hbm->mm))
		drm_err(&ndev->drm, "HBM ranges still allocated at teardown\n");
	drm_mm_takedown(&hbm->mm);
	mutex_destroy(&hbm->lock);
}

/* Forget the pages of [start, start + size): unmap them from the engine. */
static void neuron_hbm_clear(struct neuron_device *ndev, u64 start, u64 size)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	lockdep_assert_held(&hbm->lock);
	unmap_mapping_range(ndev->drm.anon_inode->i_mapping,
			    (drm_vma_node_start(&hbm->vma) << PAGE_SHIFT) + start,
			    size, 1);
	neuron_hbm_drop_pages(hbm, start >> PAGE_SHIFT,
			      (start + size - 1) >> PAGE_SHIFT);
}

/**
 * neuron_hbm_alloc - allocate a zeroed, page aligned range of HBM
 * @ndev: device
 * @node: zeroed node to fill
 * @size: bytes, a multiple of PAGE_SIZE
 *
 * Return: 0 or -ENOSPC when no free range is large enough.
 */
int neuron_hbm_alloc(struct neuron_device *ndev, struct drm_mm_node *node,
		     u64 size)
{
	struct neuron_hbm *hbm = &ndev->hbm;
	int ret;

	mutex_lock(&hbm->lock);
	ret = drm_mm_insert_node_generic(&hbm->mm, node, size, PAGE_SIZE, 0,
					 DRM_MM_INSERT_BEST);
	if (!ret) {
		/* The engine may have written here while it was free. */
		neuron_hbm_clear(ndev, node->start, node->size);
		hbm->used += node->size;
		hbm->bo_count++;
	}
	mutex_unlock(&hbm->lock);
	return ret ? -ENOSPC : 0;
}

void neuron_hbm_free(struct neuron_device *ndev, struct drm_mm_node *node)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	mutex_lock(&hbm->lock);
	neuron_hbm_clear(ndev, node->start, node->size);
	hbm->used -= node->size;
	hbm->bo_count--;
	drm_mm_remove_node(node);
	mutex_unlock(&hbm->lock);
}

/* Look up, or with @alloc allocate, the page at @idx. Caller holds lock. */
static struct page *neuron_hbm_page(struct neuron_hbm *hbm, unsigned long idx,
				    bool alloc)
{
	struct page *page = xa_load(&hbm->pages, idx);
	int ret;

	if (page || !alloc)
		return page;
	page = alloc_page(GFP_HIGHUSER | __GFP_ZERO);
	if (!page)
		return NULL;
	ret = xa_err(xa_store(&hbm->pages, idx, page, GFP_KERNEL));
	if (ret) {
		__free_page(page);
		return NULL;
	}
	atomic64_inc(&hbm->resident);
	return page;
}

/**
 * neuron_hbm_populate - back [addr, addr + len) with pages before a job
 * writes it, so that jobs never allocate while their fence is pending
 * @hbm: device memory
 * @addr: HBM address
 * @len: bytes
 *
 * Return: 0 or -ENOMEM.
 */
int neuron_hbm_populate(struct neuron_hbm *hbm, u64 addr, u64 len)
{
	unsigned long idx, last = (addr + len - 1) >> PAGE_SHIFT;
	int ret = 0;

	mutex_lock(&hbm->lock);
	for (idx = addr >> PAGE_SHIFT; idx <= last; idx++) {
		if (!neuron_hbm_page(hbm, idx, true)) {
			ret = -ENOMEM;
			break;
		}
		cond_resched();
	}
	mutex_unlock(&hbm->lock);
	return ret;
}

/*
 * The copy helpers below run in DMA jobs. The ranges belong to BOs the job
 * holds, so their pages cannot go away; writes find them populated.
 */
int neuron_hbm_write(struct neuron_hbm *hbm, u64 addr, const void *src,
		     u64 len)
{
	while (len) {
		u32 off = offset_in_page(addr);
		u32 n = min_t(u64, len, PAGE_SIZE - off);
		struct page *page = xa_load(&hbm->pages, addr >> PAGE_SHIFT);

		if (!page)
			return -EIO;
		memcpy_to_page(page, off, src, n);
		addr += n;
		src += n;
		len -= n;
	}
	return 0;
}

void neuron_hbm_read(struct neuron_hbm *hbm, u64 addr, void *dst, u64 len)
{
	while (len) {
		u32 off = offset_in_page(addr);
		u32 n = min_t(u64, len, PAGE_SIZE - off);
		struct page *page = xa_load(&hbm->pages, addr >> PAGE_SHIFT);

		if (page)
			memcpy_from_page(dst, page, off, n);
		else
			memset(dst, 0, n);
		addr += n;
		dst += n;
		len -= n;
	}
}

int neuron_hbm_copy(struct neuron_hbm *hbm, u64 dst, u64 src, u64 len)
{
	while (len) {
		u32 n = min_t(u64, len, PAGE_SIZE - offset_in_page(dst));
		struct page *page = xa_load(&hbm->pages, dst >> PAGE_SHIFT);
		void *vaddr;

		if (!page)
			return -EIO;
		vaddr = kmap_local_page(page);
		neuron_hbm_read(hbm, src, vaddr + offset_in_page(dst), n);
		kunmap_local(vaddr);
		dst += n;
		src += n;
		len -= n;
	}
	return 0;
}

u64 neuron_hbm_largest_free(struct neuron_hbm *hbm)
{
	struct drm_mm_node *entry;
	u64 start, end, best = 0;

	mutex_lock(&hbm->lock);
	drm_mm_for_each_hole(entry, &hbm->mm, start, end)
		best = max(best, end - start);
	mutex_unlock(&hbm->lock);
	return best;
}

static vm_fault_t neuron_hbm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct neuron_device *ndev = vma->vm_private_data;
	struct neuron_hbm *hbm = &ndev->hbm;
	unsigned long idx = vmf->pgoff - drm_vma_node_start(&hbm->vma);
	struct page *page;
	vm_fault_t ret;

	if (idx >= hbm->size >> PAGE_SHIFT)
		return VM_FAULT_SIGBUS;
	/* Insert under the lock so that a concurrent clear cannot miss it. */
	mutex_lock(&hbm->lock);
	page = neuron_hbm_page(hbm, idx, true);
	ret = page ? vmf_insert_pfn(vma, vmf->address, page_to_pfn(page)) :
		     VM_FAULT_OOM;
	mutex_unlock(&hbm->lock);
	return ret;
}

static const struct vm_operations_struct neuron_hbm_vm_ops = {
	.fault = neuron_hbm_fault,
};

/**
 * neuron_hbm_mmap - map the HBM aperture into the engine's address space
 * @ndev: device
 * @vma: shared mapping starting at the aperture's fake offset
 *
 * Return: 0, or -EINVAL for a private or oversized mapping.
 */
int neuron_hbm_mmap(struct neuron_device *ndev, struct vm_area_struct *vma)
{
	if (!(vma->vm_flags & VM_SHARED) ||
	    vma_pages(vma) > ndev->hbm.size >> PAGE_SHIFT)
		return -EINVAL;
	vm_flags_set(vma, VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &neuron_hbm_vm_ops;
	vma->vm_private_data = ndev;
	return 0;
}
