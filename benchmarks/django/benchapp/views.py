from django.db import transaction
from django.http import JsonResponse

from .models import Hit


def hit(request):
    """A write and a read: a transaction that looks up the client's last
    sequence number and inserts a row, then a read of the client's count."""
    client = int(request.GET["client"])
    seq = int(request.GET["seq"])
    with transaction.atomic():
        last = Hit.objects.filter(client=client).order_by("-seq").values_list("seq", flat=True).first()
        row = Hit.objects.create(client=client, seq=seq)
    count = Hit.objects.filter(client=client).count()
    return JsonResponse({"id": row.pk, "previous": last, "count": count})
