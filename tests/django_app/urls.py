from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("hello", views.hello),
    path("fail/<str:backend>", views.enqueue_then_fail),
    path("commit/<str:backend>", views.enqueue_and_commit),
]
